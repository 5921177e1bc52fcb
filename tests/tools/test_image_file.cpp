// Image files of purine predict (tools/cli/image_file.*): PNG and PGM written and read back pixel
// for pixel, PNGs of other kinds (colour, alpha, palette, 16-bit, interlaced; written here with
// libpng directly) read as the documented gray, and damaged or foreign files refused naming them.
#include <png.h>

#include <catch2/catch.hpp>
#include <csetjmp>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "temp_dir.hpp"
#include "tools/cli/image_file.hpp"

namespace {

using purine::Error;
using purine::cli::GrayImage;
using purine::cli::ImageFormat;
using purine::cli::read_gray_image;
using purine::cli::write_gray_image;

// A PNG of any colour type and bit depth, written with libpng as another program would: `rows`
// holds the samples as stored (16-bit ones big-endian), `palette` the colours of a palette image.
// Only trivially destructible locals, as libpng's longjmp needs.
bool write_png_raw(const char* path, int width, int height, int color_type, int bit_depth,
                   bool interlaced, const unsigned char* samples, size_t row_bytes,
                   const png_color* palette, int palette_size) {
  FILE* file = std::fopen(path, "wb");
  if (file == nullptr) return false;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(file);
    return false;
  }
  png_init_io(png, file);
  png_set_IHDR(png, info, width, height, bit_depth, color_type,
               interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (palette != nullptr) png_set_PLTE(png, info, palette, palette_size);
  png_write_info(png, info);
  const int passes = png_set_interlace_handling(png);
  for (int pass = 0; pass < passes; ++pass)
    for (int y = 0; y < height; ++y) png_write_row(png, samples + y * row_bytes);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return std::fclose(file) == 0;
}

void write_png(const std::string& path, int width, int height, int color_type, int bit_depth,
               const std::vector<unsigned char>& samples, bool interlaced = false,
               const std::vector<png_color>& palette = {}) {
  REQUIRE(samples.size() % height == 0);
  REQUIRE(write_png_raw(path.c_str(), width, height, color_type, bit_depth, interlaced,
                        samples.data(), samples.size() / height,
                        palette.empty() ? nullptr : palette.data(),
                        static_cast<int>(palette.size())));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
// A string literal's bytes, NULs included.
template <size_t N>
std::string bytes_of(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// The message of the purine::Error that reading `path` throws ("" when it reads).
std::string read_error(const std::string& path) {
  try {
    read_gray_image(path, "--image=" + path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

GrayImage gradient(int64_t width, int64_t height) {
  GrayImage image{width, height, {}};
  for (int64_t i = 0; i < width * height; ++i)
    image.pixels.push_back(static_cast<uint8_t>(i * 255 / (width * height - 1)));
  return image;
}

}  // namespace

using Catch::Contains;

TEST_CASE("an image written as PNG or PGM reads back pixel for pixel", "[cli][image]") {
  purine::testing::TempDir dir;
  const GrayImage image = gradient(7, 5);  // 0, 7, 14, ..., 255
  REQUIRE(image.pixels[1] == 7);
  REQUIRE(image.pixels.back() == 255);
  for (ImageFormat format : {ImageFormat::kPng, ImageFormat::kPgm}) {
    // The format is the bytes', not the name's: both files are named .img.
    const std::string path =
        dir.file(std::string("image-") + purine::cli::image_format_extension(format) + ".img");
    write_gray_image(path, image, format);
    const std::string bytes = read_bytes(path);
    if (format == ImageFormat::kPng)
      CHECK(bytes.substr(0, 8) == "\x89PNG\r\n\x1a\n");
    else
      CHECK(bytes.substr(0, 11) == "P5\n7 5\n255\n");
    const GrayImage back = read_gray_image(path, path);
    CHECK(back.width == 7);
    CHECK(back.height == 5);
    CHECK(back.pixels == image.pixels);
  }
  CHECK(purine::cli::parse_image_format("png", "--sample-format") == ImageFormat::kPng);
  CHECK(purine::cli::parse_image_format("pgm", "--sample-format") == ImageFormat::kPgm);
  CHECK_THROWS_WITH(purine::cli::parse_image_format("jpg", "--sample-format"),
                    "--sample-format=jpg: give png or pgm");
}

TEST_CASE("colour, alpha, palette, 16-bit and interlaced PNGs read as the documented gray",
          "[cli][image]") {
  purine::testing::TempDir dir;
  // RGB: gray = (299 R + 587 G + 114 B + 500) / 1000.
  write_png(dir.file("rgb.png"), 3, 2, PNG_COLOR_TYPE_RGB, 8,
            {255, 0, 0, 0, 255, 0, 0, 0, 255,  //
             255, 255, 255, 10, 20, 30, 128, 64, 32});
  GrayImage rgb = read_gray_image(dir.file("rgb.png"), "rgb.png");
  CHECK(rgb.width == 3);
  CHECK(rgb.height == 2);
  CHECK(rgb.pixels == std::vector<uint8_t>{76, 150, 29, 255, 18, 79});

  // Alpha composites onto black: (gray * alpha + 127) / 255.
  write_png(dir.file("rgba.png"), 2, 1, PNG_COLOR_TYPE_RGBA, 8, {255, 255, 255, 128, 0, 255, 0, 0});
  CHECK(read_gray_image(dir.file("rgba.png"), "rgba.png").pixels == std::vector<uint8_t>{128, 0});
  write_png(dir.file("ga.png"), 2, 1, PNG_COLOR_TYPE_GRAY_ALPHA, 8, {200, 255, 200, 51});
  CHECK(read_gray_image(dir.file("ga.png"), "ga.png").pixels == std::vector<uint8_t>{200, 40});

  // 16-bit samples (big-endian) scaled to 8 bits, rounded.
  write_png(dir.file("gray16.png"), 4, 1, PNG_COLOR_TYPE_GRAY, 16,
            {0, 0, 0xff, 0xff, 0x64, 0x64, 0x80, 0x00});  // 0, 65535, 100 * 257, 32768
  CHECK(read_gray_image(dir.file("gray16.png"), "gray16.png").pixels ==
        std::vector<uint8_t>{0, 255, 100, 128});

  // A 2-bit palette image: indices to colours, then to gray.
  write_png(dir.file("palette.png"), 4, 1, PNG_COLOR_TYPE_PALETTE, 2,
            {0b00011011},  // indices 0, 1, 2, 3
            false, {{0, 0, 0}, {255, 0, 0}, {255, 255, 255}, {0, 0, 255}});
  CHECK(read_gray_image(dir.file("palette.png"), "palette.png").pixels ==
        std::vector<uint8_t>{0, 76, 255, 29});

  // 1-bit gray scales up to 0 and 255.
  write_png(dir.file("gray1.png"), 8, 1, PNG_COLOR_TYPE_GRAY, 1, {0b10100000});
  CHECK(read_gray_image(dir.file("gray1.png"), "gray1.png").pixels ==
        std::vector<uint8_t>{255, 0, 255, 0, 0, 0, 0, 0});

  // Interlaced (Adam7) reads whole, as the same image written plainly.
  const GrayImage plain = gradient(11, 9);
  write_png(dir.file("interlaced.png"), 11, 9, PNG_COLOR_TYPE_GRAY, 8,
            {plain.pixels.begin(), plain.pixels.end()}, /*interlaced=*/true);
  CHECK(read_bytes(dir.file("interlaced.png"))[28] == 1);  // IHDR's interlace method: Adam7
  const GrayImage interlaced = read_gray_image(dir.file("interlaced.png"), "interlaced.png");
  CHECK(interlaced.width == 11);
  CHECK(interlaced.height == 9);
  CHECK(interlaced.pixels == plain.pixels);

  // A PGM of another maxval is scaled to 0..255; two bytes a sample above 255.
  write_bytes(dir.file("max15.pgm"), bytes_of("P5\n# a comment\n3 1\n15\n\x00\x07\x0f"));
  CHECK(read_gray_image(dir.file("max15.pgm"), "max15.pgm").pixels ==
        std::vector<uint8_t>{0, 119, 255});
  write_bytes(dir.file("max65535.pgm"), bytes_of("P5 2 1 65535\n\xff\xff\x64\x64"));
  CHECK(read_gray_image(dir.file("max65535.pgm"), "max65535.pgm").pixels ==
        std::vector<uint8_t>{255, 100});
}

TEST_CASE("truncated, corrupt and foreign image files are refused naming the file",
          "[cli][image]") {
  purine::testing::TempDir dir;
  GrayImage noise{28, 28, {}};
  for (int i = 0; i < 28 * 28; ++i) noise.pixels.push_back(static_cast<uint8_t>(i * 7919 % 251));
  write_gray_image(dir.file("good.png"), noise, ImageFormat::kPng);
  write_gray_image(dir.file("good.pgm"), noise, ImageFormat::kPgm);
  const std::string png = read_bytes(dir.file("good.png"));
  const std::string pgm = read_bytes(dir.file("good.pgm"));
  REQUIRE(read_error(dir.file("good.png")).empty());

  // Cut in the middle of the image data.
  write_bytes(dir.file("truncated.png"), png.substr(0, png.size() / 2));
  CHECK_THAT(read_error(dir.file("truncated.png")),
             Contains("--image=" + dir.file("truncated.png") +
                      ": truncated PNG: the file ends before the PNG does"));
  // Cut after the image data, before IEND.
  write_bytes(dir.file("no-end.png"), png.substr(0, png.size() - 12));
  CHECK_THAT(read_error(dir.file("no-end.png")),
             Contains("--image=" + dir.file("no-end.png") + ": truncated PNG"));

  // The image data's CRC changed; then a byte of the data itself, which zlib or the CRC finds.
  const size_t idat = png.find("IDAT");
  REQUIRE(idat >= 4);
  const size_t length = static_cast<unsigned char>(png[idat - 2]) << 8 |
                        static_cast<unsigned char>(png[idat - 1]);  // < 64 KiB here
  std::string bad_crc = png;
  bad_crc[idat + 4 + length] ^= 0x01;
  write_bytes(dir.file("bad-crc.png"), bad_crc);
  CHECK(read_error(dir.file("bad-crc.png")) ==
        "--image=" + dir.file("bad-crc.png") + ": corrupt PNG (libpng: IDAT: CRC error)");
  std::string bad_data = png;
  bad_data[idat + 10] ^= 0x20;
  write_bytes(dir.file("bad-data.png"), bad_data);
  CHECK_THAT(read_error(dir.file("bad-data.png")),
             Contains("--image=" + dir.file("bad-data.png") + ": corrupt PNG (libpng: "));

  write_bytes(dir.file("truncated.pgm"), pgm.substr(0, pgm.size() - 100));
  CHECK(read_error(dir.file("truncated.pgm")) ==
        "--image=" + dir.file("truncated.pgm") +
            ": truncated PGM: the file ends after 684 of its 784 pixels");
  write_bytes(dir.file("bad-header.pgm"), "P5\n28 x\n255\n");
  CHECK_THAT(read_error(dir.file("bad-header.pgm")),
             Contains("--image=" + dir.file("bad-header.pgm") + ": a PGM whose header is not"));

  // Not an image at all, whatever the name says; an empty file; a text PGM; no file.
  write_bytes(dir.file("notes.png"), "these are not pixels\n");
  CHECK(read_error(dir.file("notes.png")) ==
        "--image=" + dir.file("notes.png") +
            ": not a PNG or binary PGM image (its first bytes are neither PNG's signature nor "
            "\"P5\")");
  write_bytes(dir.file("empty.png"), "");
  CHECK(read_error(dir.file("empty.png")) ==
        "--image=" + dir.file("empty.png") + ": the file is empty; give a PNG or binary PGM image");
  write_bytes(dir.file("text.pgm"), "P2\n2 1\n255\n0 255\n");
  CHECK_THAT(read_error(dir.file("text.pgm")), Contains(": a plain (text) PGM, P2"));
  CHECK(read_error(dir.file("missing.png")) ==
        "--image=" + dir.file("missing.png") + ": cannot open it (No such file or directory)");

  // Writing where no file can be made names the path.
  CHECK_THROWS_WITH(write_gray_image(dir.file("no/such/dir.png"), noise, ImageFormat::kPng),
                    Contains("cannot write " + dir.file("no/such/dir.png")));
}
