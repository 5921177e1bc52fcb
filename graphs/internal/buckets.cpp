#include "graphs/internal/buckets.hpp"

#include "base/error.hpp"

namespace purine {

std::vector<std::vector<int>> plan_buckets(const std::vector<int64_t>& bytes,
                                           int64_t bucket_bytes) {
  std::vector<std::vector<int>> buckets;
  int64_t open_bytes = 0;  // of buckets.back(), while it may still grow
  bool open = false;
  for (int i = 0; i < static_cast<int>(bytes.size()); ++i) {
    if (bytes[i] >= bucket_bytes) {
      buckets.push_back({i});
      open = false;
      continue;
    }
    if (!open || open_bytes + bytes[i] > bucket_bytes) {
      buckets.emplace_back();
      open_bytes = 0;
      open = true;
    }
    buckets.back().push_back(i);
    open_bytes += bytes[i];
  }
  return buckets;
}

Blob* fuse(Graph& g, const std::string& name, const std::vector<Blob*>& blobs) {
  require(!blobs.empty(), name, ": nothing to fuse");
  Graph::Scope scope(g, name);
  std::vector<Blob*> flat;
  for (size_t k = 0; k < blobs.size(); ++k) {
    const std::vector<int64_t> count = {blobs[k]->shape().count()};
    flat.push_back(
        g.apply("flat" + std::to_string(k), "reshape", Attrs().set("shape", count), {blobs[k]})[0]);
  }
  if (flat.size() == 1) return flat[0];
  return g.apply("concat", "concat", Attrs().set("axis", 0), flat)[0];
}

std::vector<Blob*> unfuse(Graph& g, const std::string& name, Blob* flat,
                          const std::vector<Shape>& shapes) {
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (const Shape& s : shapes) {
    sizes.push_back(s.count());
    total += s.count();
  }
  require(flat->shape().count() == total, name, ": '", flat->name(), "' has ",
          flat->shape().count(), " elements, the shapes add up to ", total);
  Graph::Scope scope(g, name);
  std::vector<Blob*> pieces = {flat};
  if (shapes.size() > 1) {
    Blob* line =
        g.apply("line", "reshape", Attrs().set("shape", std::vector<int64_t>{total}), {flat})[0];
    pieces = g.apply("split", "split", Attrs().set("axis", 0).set("sizes", sizes), {line});
  }
  std::vector<Blob*> shaped;
  for (size_t k = 0; k < shapes.size(); ++k)
    shaped.push_back(g.apply("piece" + std::to_string(k), "reshape",
                             Attrs().set("shape", shapes[k].dims()), {pieces[k]})[0]);
  return shaped;
}

}  // namespace purine
