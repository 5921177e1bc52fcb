#include "operators/cpu/idx_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "base/hash.hpp"

namespace purine {

namespace {

constexpr int64_t kFingerprintBytes = int64_t{1} << 16;

std::atomic<int64_t> reads{0};

// FNV-1a of the file's first and last kFingerprintBytes (the whole of a small file); 0 when it
// cannot be read (the load that follows then names the problem).
uint64_t fingerprint(const std::string& path, int64_t size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  std::vector<char> bytes;
  auto take = [&](int64_t offset, int64_t length) {
    const size_t start = bytes.size();
    bytes.resize(start + static_cast<size_t>(length));
    const ssize_t got = ::pread(fd, bytes.data() + start, static_cast<size_t>(length), offset);
    bytes.resize(start + static_cast<size_t>(std::max<ssize_t>(got, 0)));
  };
  take(0, std::min(size, kFingerprintBytes));
  if (size > kFingerprintBytes) {
    const int64_t tail = std::min(size - kFingerprintBytes, kFingerprintBytes);
    take(size - tail, tail);
  }
  ::close(fd);
  return fnv1a64(std::string_view(bytes.data(), bytes.size()));
}

// What the split's files are on disk now.
std::string file_key(const std::string& dir, const std::string& split) {
  const IdxPaths paths = find_idx_files(dir, split);
  std::string key;
  for (const std::string& path : {paths.images, paths.labels}) {
    struct stat info {};
    ::stat(path.c_str(), &info);
    key += str(path, '|', info.st_size, '|', info.st_ino, '|', info.st_mtim.tv_sec, '.',
               info.st_mtim.tv_nsec, '|', info.st_ctim.tv_sec, '.', info.st_ctim.tv_nsec, '|',
               fingerprint(path, info.st_size), '|');
  }
  return key;
}

// The caches, under one mutex (a load holds it: loads of one split wait for each other).
struct IdxCaches {
  std::mutex mutex;
  std::map<std::string, std::weak_ptr<const IdxDataset>> loaded;  // shared_idx_dataset's
  std::map<std::string, IdxDataset> metadata;                     // cached_idx_metadata's
  // Splits read whole for their metadata, until shared_idx_dataset takes them (see the header).
  std::map<std::string, std::shared_ptr<const IdxDataset>> handed_over;
};

IdxCaches& caches() {
  static IdxCaches c;
  return c;
}

}  // namespace

std::shared_ptr<const IdxDataset> shared_idx_dataset(const std::string& dir,
                                                     const std::string& split) {
  IdxCaches& c = caches();
  const std::string key = file_key(dir, split);
  std::lock_guard<std::mutex> lock(c.mutex);
  if (auto existing = c.loaded[key].lock()) return existing;
  std::shared_ptr<const IdxDataset> dataset;
  auto pending = c.handed_over.find(key);
  if (pending != c.handed_over.end()) {
    dataset = std::move(pending->second);
    c.handed_over.erase(pending);
  } else {
    ++reads;
    dataset = std::make_shared<const IdxDataset>(load_idx_dataset(dir, split));
  }
  c.loaded[key] = dataset;
  return dataset;
}

IdxDataset cached_idx_metadata(const std::string& dir, const std::string& split) {
  IdxCaches& c = caches();
  const std::string key = file_key(dir, split);
  std::lock_guard<std::mutex> lock(c.mutex);
  auto found = c.metadata.find(key);
  if (found != c.metadata.end()) return found->second;
  std::shared_ptr<const IdxDataset> whole = c.loaded[key].lock();
  if (!whole) {
    ++reads;
    whole = std::make_shared<const IdxDataset>(load_idx_dataset(dir, split));
    c.handed_over[key] = whole;
  }
  IdxDataset meta;
  meta.images_file = whole->images_file;
  meta.labels_file = whole->labels_file;
  meta.count = whole->count;
  meta.rows = whole->rows;
  meta.cols = whole->cols;
  meta.classes = whole->classes;
  meta.labels = whole->labels;
  c.metadata.emplace(key, meta);
  return meta;
}

int64_t idx_cache_reads() { return reads.load(); }

}  // namespace purine
