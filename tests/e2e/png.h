// A PNG reader for the browser tests: enough of the format for what Chromium's --screenshot
// writes (8-bit RGB or RGBA, not interlaced), so a test can look at the pixels it drew.
#pragma once

#include <cstdint>
#include <expected>
#include <filesystem>
#include <string>
#include <vector>

namespace kleaf::e2e {

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // row by row, 3 bytes a pixel (alpha dropped)
};

// The pixels of the PNG file at `path`; an error for anything else (another bit depth or colour
// type, interlacing, a broken file).
std::expected<RgbImage, std::string> ReadPng(const std::filesystem::path& path);

}  // namespace kleaf::e2e
