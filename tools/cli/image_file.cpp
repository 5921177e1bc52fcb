#include "tools/cli/image_file.hpp"

#include <png.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include "base/error.hpp"

namespace purine::cli {

namespace {

// The most pixels an image file may have: far above any model's input, and a bound on what a
// damaged or hostile header can make us allocate (4 bytes a pixel while decoding a PNG).
constexpr uint64_t kMaxPixels = uint64_t{1} << 26;

constexpr unsigned char kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

// ---- PNG through libpng ----
// libpng reports errors by longjmp. The functions that call it (decode_png, encode_png) hold only
// trivially destructible locals, so the jump skips no destructor, and keep what they make in a
// plain struct of their caller, which frees it.

struct PngErrorMessage {
  char text[200] = "";
};

[[noreturn]] void on_png_error(png_structp png, png_const_charp message) {
  auto* error = static_cast<PngErrorMessage*>(png_get_error_ptr(png));
  std::snprintf(error->text, sizeof error->text, "%s", message);
  png_longjmp(png, 1);
}
// Warnings (an unknown colour profile, a bad CRC in an ancillary chunk, which is then skipped)
// do not stop reading; they are not printed either.
void on_png_warning(png_structp, png_const_charp) {}

// A decoded PNG: `channels` 8-bit samples a pixel (gray, gray+alpha, RGB or RGBA), malloc'd.
struct DecodedPng {
  PngErrorMessage error;
  bool too_large = false;
  png_uint_32 width = 0;
  png_uint_32 height = 0;
  int channels = 0;
  unsigned char* pixels = nullptr;
  png_bytep* rows = nullptr;
};

// Decodes the PNG `file` into `out`; false with out->error set when libpng refuses it.
bool decode_png(FILE* file, DecodedPng* out) {
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, &out->error, on_png_error, on_png_warning);
  if (png == nullptr) {
    std::snprintf(out->error.text, sizeof out->error.text, "libpng could not start");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    std::snprintf(out->error.text, sizeof out->error.text, "libpng could not start");
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_init_io(png, file);
  png_set_user_limits(png, 1u << 20, 1u << 20);
  png_read_info(png, info);
  out->width = png_get_image_width(png, info);
  out->height = png_get_image_height(png, info);
  if (static_cast<uint64_t>(out->width) * out->height > kMaxPixels) {
    out->too_large = true;
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  // To 8-bit samples of gray, gray+alpha, RGB or RGBA: palettes to their colours, gray below 8
  // bits up to 8, transparency (tRNS) to an alpha channel, 16 bits down to 8 (rounded).
  png_set_expand(png);
  png_set_scale_16(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  out->channels = png_get_channels(png, info);
  const size_t row_bytes = png_get_rowbytes(png, info);
  out->pixels = static_cast<unsigned char*>(std::malloc(row_bytes * out->height));
  out->rows = static_cast<png_bytep*>(std::malloc(sizeof(png_bytep) * out->height));
  if (out->pixels == nullptr || out->rows == nullptr) png_error(png, "out of memory");
  for (png_uint_32 r = 0; r < out->height; ++r) out->rows[r] = out->pixels + r * row_bytes;
  png_read_image(png, out->rows);
  png_read_end(png, nullptr);  // the chunks after the image, to IEND: checks their CRCs too
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

// ITU-R BT.601 luma of 8-bit stored values, rounded: the formula image_file.hpp documents.
uint8_t luma(unsigned r, unsigned g, unsigned b) {
  return static_cast<uint8_t>((299 * r + 587 * g + 114 * b + 500) / 1000);
}
// `gray` composited onto black with `alpha` (0 transparent, 255 opaque), rounded.
uint8_t over_black(unsigned gray, unsigned alpha) {
  return static_cast<uint8_t>((gray * alpha + 127) / 255);
}

GrayImage read_png(FILE* file, const std::string& label) {
  DecodedPng png;
  const bool ok = decode_png(file, &png);
  struct Free {
    DecodedPng* p;
    ~Free() {
      std::free(p->pixels);
      std::free(p->rows);
    }
  } free_png{&png};
  require(!png.too_large, label, ": a PNG of ", png.width, "x", png.height,
          " pixels, more than purine reads (", kMaxPixels, ")");
  if (!ok) {
    require(!std::feof(file), label, ": truncated PNG: the file ends before the PNG does");
    throw Error(str(label, ": corrupt PNG (libpng: ", png.error.text, ")"));
  }
  GrayImage image;
  image.width = png.width;
  image.height = png.height;
  image.pixels.resize(static_cast<size_t>(image.width * image.height));
  const int c = png.channels;
  for (png_uint_32 y = 0; y < png.height; ++y) {
    const unsigned char* in = png.rows[y];
    uint8_t* row = image.pixels.data() + static_cast<size_t>(y) * png.width;
    for (png_uint_32 x = 0; x < png.width; ++x, in += c) {
      switch (c) {
        case 1:
          row[x] = in[0];
          break;
        case 2:
          row[x] = over_black(in[0], in[1]);
          break;
        case 3:
          row[x] = luma(in[0], in[1], in[2]);
          break;
        case 4:
          row[x] = over_black(luma(in[0], in[1], in[2]), in[3]);
          break;
        default:
          throw Error(str(label, ": a PNG of ", c, " channels, which purine does not read"));
      }
    }
  }
  return image;
}

// Encodes `image` as 8-bit grayscale PNG into `file`; false with `error` set on failure.
bool encode_png(FILE* file, const GrayImage& image, PngErrorMessage* error) {
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, error, on_png_error, on_png_warning);
  if (png == nullptr) {
    std::snprintf(error->text, sizeof error->text, "libpng could not start");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_write_struct(&png, nullptr);
    std::snprintf(error->text, sizeof error->text, "libpng could not start");
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_init_io(png, file);
  png_set_IHDR(png, info, static_cast<png_uint_32>(image.width),
               static_cast<png_uint_32>(image.height), 8, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int64_t y = 0; y < image.height; ++y)
    png_write_row(png, image.pixels.data() + y * image.width);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

// ---- binary PGM ----

GrayImage read_pgm(const std::string& path, const std::string& label) {
  std::ifstream in(path, std::ios::binary);
  require(in.good(), label, ": cannot open it");
  std::string magic;
  GrayImage image;
  int64_t maxval = 0;
  in >> magic;
  // Header fields may be separated by comments ("# ...") and white space.
  auto field = [&](int64_t* value) {
    in >> std::ws;
    while (in.peek() == '#') {
      std::string comment;
      std::getline(in, comment);
      in >> std::ws;
    }
    in >> *value;
  };
  field(&image.width);
  field(&image.height);
  field(&maxval);
  require(in.good() && image.width > 0 && image.height > 0 && maxval >= 1 && maxval <= 65535, label,
          ": a PGM whose header is not \"P5 width height maxval\" with a width, height and maxval "
          "(1 to 65535) above 0");
  // Divided, not multiplied: a product of two huge sides could wrap to a small one.
  require(static_cast<uint64_t>(image.height) <= kMaxPixels / static_cast<uint64_t>(image.width),
          label, ": a PGM of ", image.width, "x", image.height, " pixels, more than purine reads (",
          kMaxPixels, ")");
  in.get();  // the single white-space character before the pixels
  const size_t count = static_cast<size_t>(image.width * image.height);
  const size_t bytes = maxval > 255 ? 2 : 1;
  std::vector<unsigned char> raw(count * bytes);
  in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
  require(in.gcount() == static_cast<std::streamsize>(raw.size()), label,
          ": truncated PGM: the file ends after ", in.gcount() / bytes, " of its ", count,
          " pixels");
  image.pixels.resize(count);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t v = bytes == 2 ? (raw[2 * i] << 8 | raw[2 * i + 1]) : raw[i];
    require(v <= static_cast<uint64_t>(maxval), label, ": pixel ", i, " is ", v,
            ", above the PGM's maxval ", maxval);
    image.pixels[i] = static_cast<uint8_t>((v * 255 + maxval / 2) / maxval);
  }
  return image;
}

}  // namespace

ImageFormat parse_image_format(const std::string& name, const std::string& flag) {
  if (name == "png") return ImageFormat::kPng;
  if (name == "pgm") return ImageFormat::kPgm;
  throw Error(str(flag, "=", name, ": give png or pgm"));
}

const char* image_format_extension(ImageFormat format) {
  return format == ImageFormat::kPng ? "png" : "pgm";
}

GrayImage read_gray_image(const std::string& path, const std::string& label) {
  File file(std::fopen(path.c_str(), "rb"));
  require(file != nullptr, label, ": cannot open it (", std::strerror(errno), ")");
  unsigned char magic[8] = {};
  const size_t n = std::fread(magic, 1, sizeof magic, file.get());
  require(!std::ferror(file.get()), label, ": cannot read it (", std::strerror(errno), ")");
  require(n > 0, label, ": the file is empty; give a PNG or binary PGM image");
  if (n == sizeof magic && std::memcmp(magic, kPngSignature, sizeof magic) == 0) {
    std::rewind(file.get());
    return read_png(file.get(), label);
  }
  if (n >= 2 && magic[0] == 'P' && magic[1] == '5') return read_pgm(path, label);
  require(!(n >= 2 && magic[0] == 'P' && magic[1] == '2'), label,
          ": a plain (text) PGM, P2; purine reads binary PGM (P5) and PNG");
  throw Error(str(label,
                  ": not a PNG or binary PGM image (its first bytes are neither PNG's signature "
                  "nor \"P5\")"));
}

void write_gray_image(const std::string& path, const GrayImage& image, ImageFormat format) {
  require(image.width > 0 && image.height > 0 &&
              image.pixels.size() == static_cast<size_t>(image.width * image.height),
          "cannot write ", path, ": an image of ", image.width, "x", image.height, " has ",
          image.width * image.height, " pixels, not ", image.pixels.size());
  File file(std::fopen(path.c_str(), "wb"));
  require(file != nullptr, "cannot write ", path, " (", std::strerror(errno), ")");
  if (format == ImageFormat::kPng) {
    PngErrorMessage error;
    require(encode_png(file.get(), image, &error), "cannot write ", path, " (libpng: ", error.text,
            ")");
  } else {
    std::fprintf(file.get(), "P5\n%lld %lld\n255\n", static_cast<long long>(image.width),
                 static_cast<long long>(image.height));
    std::fwrite(image.pixels.data(), 1, image.pixels.size(), file.get());
  }
  const bool written = std::fflush(file.get()) == 0 && !std::ferror(file.get());
  require(written, "cannot write ", path, " (", std::strerror(errno), ")");
  require(std::fclose(file.release()) == 0, "cannot write ", path, " (", std::strerror(errno), ")");
}

}  // namespace purine::cli
