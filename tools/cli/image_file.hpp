// Image files for `purine predict`: 8-bit grayscale images read from PNG (Debian's libpng) or
// binary PGM, and written as either. Free functions on a plain value type; no shared state, so
// every call is thread-safe. Errors are purine::Error naming the file as `label` gives it.
//
//   GrayImage image = read_gray_image("shirt.png", "--image=shirt.png");  // PNG or PGM
//   write_gray_image("out.pgm", image, ImageFormat::kPgm);
//
// Reading decides the format by the file's first bytes (PNG's 8-byte signature, or "P5"), never
// by its name. Every PNG is read as 8-bit grayscale:
//   - gray of 1, 2 or 4 bits is scaled up to 8 bits, and 16-bit samples are scaled down to
//     8 bits, rounded (round(v * 255 / 65535)); palette images are expanded to their colours;
//   - colour becomes gray by the ITU-R BT.601 luma of the stored (gamma-encoded) values,
//     gray = (299 R + 587 G + 114 B + 500) / 1000 in integers (the formula of PIL's
//     convert("L") and of most image tools);
//   - alpha (an alpha channel or a tRNS transparency) composites the image onto black, the
//     background of Fashion-MNIST's images: gray = (gray * alpha + 127) / 255;
//   - interlaced (Adam7) images are read whole; a gAMA or colour profile chunk is ignored.
// A binary PGM (P5) of any maxval from 1 to 65535 (two bytes per sample, big-endian, above 255)
// is scaled to 0..255, rounded. A damaged file (truncated, a bad CRC, a bad header) is refused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace purine::cli {

// An 8-bit grayscale image, row by row from the top, `width` pixels a row, 0 black, 255 white.
struct GrayImage {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> pixels;  // width * height
};

enum class ImageFormat { kPng, kPgm };

// "png" or "pgm" to its format; anything else throws naming `flag` (e.g. "--sample-format").
ImageFormat parse_image_format(const std::string& name, const std::string& flag);
// The file name extension of a format, without the dot: "png" or "pgm".
const char* image_format_extension(ImageFormat format);

// Reads a PNG or binary PGM file as 8-bit grayscale (see above). `label` is how errors name the
// file (e.g. "--image=x.png"); they say what is wrong: cannot be opened, empty, neither PNG nor
// PGM, truncated, corrupt (libpng's words, e.g. a CRC error), too large.
GrayImage read_gray_image(const std::string& path, const std::string& label);

// Writes `image` to `path` as 8-bit grayscale PNG or binary PGM (P5, maxval 255); throws naming
// `path` when the file cannot be written or the image's size does not match its pixels.
void write_gray_image(const std::string& path, const GrayImage& image, ImageFormat format);

}  // namespace purine::cli
