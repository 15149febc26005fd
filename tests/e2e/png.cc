#include "tests/e2e/png.h"

#include <zlib.h>

#include <cstdlib>
#include <cstring>

#include "tests/e2e/kleaf_process.h"

namespace kleaf::e2e {

namespace {

uint32_t BigEndian32(const std::string& s, size_t at) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(s[at])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 2])) << 8) |
         static_cast<uint32_t>(static_cast<uint8_t>(s[at + 3]));
}

// The PNG predictor "Paeth" (RFC 2083, 6.6).
uint8_t Paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return static_cast<uint8_t>(a);
  return static_cast<uint8_t>(pb <= pc ? b : c);
}

}  // namespace

std::expected<RgbImage, std::string> ReadPng(const std::filesystem::path& path) {
  const std::string file = ReadFile(path);
  static const char kSignature[] = "\x89PNG\r\n\x1a\n";
  if (file.size() < 8 || file.compare(0, 8, kSignature, 8) != 0) {
    return std::unexpected(path.string() + ": not a PNG file");
  }
  int width = 0, height = 0, channels = 0;
  std::string compressed;
  size_t at = 8;
  bool ended = false;
  while (!ended) {
    if (at + 12 > file.size()) return std::unexpected("truncated PNG chunk");
    const uint32_t length = BigEndian32(file, at);
    const std::string type = file.substr(at + 4, 4);
    if (at + 12 + length > file.size()) return std::unexpected("truncated PNG chunk " + type);
    const size_t data = at + 8;
    if (type == "IHDR") {
      if (length != 13) return std::unexpected("bad IHDR");
      width = static_cast<int>(BigEndian32(file, data));
      height = static_cast<int>(BigEndian32(file, data + 4));
      const int depth = static_cast<uint8_t>(file[data + 8]);
      const int colour = static_cast<uint8_t>(file[data + 9]);
      const int interlace = static_cast<uint8_t>(file[data + 12]);
      if (depth != 8 || (colour != 2 && colour != 6) || interlace != 0) {
        return std::unexpected("unsupported PNG: depth " + std::to_string(depth) +
                               ", colour type " + std::to_string(colour) + ", interlace " +
                               std::to_string(interlace));
      }
      channels = colour == 6 ? 4 : 3;
    } else if (type == "IDAT") {
      compressed.append(file, data, length);
    } else if (type == "IEND") {
      ended = true;
    }
    at += 12 + length;
  }
  if (channels == 0 || width <= 0 || height <= 0) return std::unexpected("PNG without IHDR");

  const size_t stride = static_cast<size_t>(width) * channels;
  std::vector<uint8_t> raw((stride + 1) * static_cast<size_t>(height));
  uLongf raw_size = raw.size();
  if (uncompress(raw.data(), &raw_size, reinterpret_cast<const Bytef*>(compressed.data()),
                 compressed.size()) != Z_OK ||
      raw_size != raw.size()) {
    return std::unexpected("PNG image data does not inflate to " + std::to_string(raw.size()) +
                           " bytes");
  }

  // Undo each row's filter (RFC 2083, 6): a byte is predicted from the one left of it (a), above
  // it (b) and above-left (c), each of the same channel.
  std::vector<uint8_t> pixels(stride * static_cast<size_t>(height));
  for (size_t y = 0; y < static_cast<size_t>(height); ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* in = &raw[y * (stride + 1) + 1];
    uint8_t* out = &pixels[y * stride];
    const uint8_t* up = y > 0 ? &pixels[(y - 1) * stride] : nullptr;
    for (size_t x = 0; x < stride; ++x) {
      const int a = x >= static_cast<size_t>(channels) ? out[x - channels] : 0;
      const int b = up ? up[x] : 0;
      const int c = up && x >= static_cast<size_t>(channels) ? up[x - channels] : 0;
      int predicted = 0;
      switch (filter) {
        case 0:
          predicted = 0;
          break;
        case 1:
          predicted = a;
          break;
        case 2:
          predicted = b;
          break;
        case 3:
          predicted = (a + b) / 2;
          break;
        case 4:
          predicted = Paeth(a, b, c);
          break;
        default:
          return std::unexpected("unknown PNG filter " + std::to_string(filter));
      }
      out[x] = static_cast<uint8_t>(in[x] + predicted);
    }
  }
  RgbImage image{width, height, {}};
  image.rgb.reserve(static_cast<size_t>(width) * height * 3);
  for (size_t i = 0; i < pixels.size(); i += channels) {
    image.rgb.insert(image.rgb.end(), &pixels[i], &pixels[i] + 3);
  }
  return image;
}

}  // namespace kleaf::e2e
