// File: verl/models/vlm/image.cc
#include "verl/models/vlm/image.h"

#include <csetjmp>
#include <cstdio>  // before jpeglib.h, which uses FILE and size_t
#include <cstring>

// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on
#include <png.h>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "verl/core/file_util.h"

namespace verl::models::vlm {
namespace {

absl::Status Corrupt(absl::string_view source, absl::string_view format,
                     absl::string_view detail) {
  return absl::InvalidArgumentError(absl::StrCat(
      source, ": corrupt or truncated ", format, " image (", detail, ")"));
}

absl::Status CheckSize(int64_t width, int64_t height, absl::string_view source,
                       const DecodeLimits& limits) {
  if (width <= 0 || height <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": image has an empty size ", width, "x", height));
  }
  if (width > limits.max_side || height > limits.max_side ||
      width * height > limits.max_pixels) {
    return absl::ResourceExhaustedError(
        absl::StrCat(source, ": image of ", width, "x", height,
                     " pixels exceeds the limit (", limits.max_pixels,
                     " pixels, ", limits.max_side, " per side)"));
  }
  return absl::OkStatus();
}

// ---- PNG --------------------------------------------------------------------

// libpng reports errors by longjmp to the jmp_buf of its struct. Every call
// that may fail runs inside PngTry's frame, which holds the setjmp; the
// callables own no memory (a longjmp skips destructors), they only fill
// objects of the caller.
struct PngIo {
  const uint8_t* data = nullptr;
  size_t size = 0, pos = 0;
  std::string* out = nullptr;  // encoder sink
  char message[256] = "";
};

void PngErrorFn(png_structp png, png_const_charp msg) {
  auto* io = static_cast<PngIo*>(png_get_error_ptr(png));
  std::snprintf(io->message, sizeof io->message, "%s", msg);
  png_longjmp(png, 1);
}
void PngWarningFn(png_structp, png_const_charp) {}

void PngReadFn(png_structp png, png_bytep out, png_size_t n) {
  auto* io = static_cast<PngIo*>(png_get_io_ptr(png));
  if (n > io->size - io->pos) png_error(png, "unexpected end of file");
  std::memcpy(out, io->data + io->pos, n);
  io->pos += n;
}
void PngWriteFn(png_structp png, png_bytep data, png_size_t n) {
  static_cast<PngIo*>(png_get_io_ptr(png))
      ->out->append(reinterpret_cast<const char*>(data), n);
}
void PngFlushFn(png_structp) {}

template <typename F>
bool PngTry(png_structp png, F&& f) {
  if (setjmp(png_jmpbuf(png))) return false;
  f();
  return true;
}

// Owns a read or write struct pair.
struct PngHandle {
  png_structp png = nullptr;
  png_infop info = nullptr;
  bool write = false;
  ~PngHandle() {
    if (write) {
      png_destroy_write_struct(&png, &info);
    } else {
      png_destroy_read_struct(&png, &info, nullptr);
    }
  }
};

// ---- JPEG -------------------------------------------------------------------

struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = "";
};

void JpegErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings are ignored as PIL ignores them, except the end of data: PIL
// refuses a truncated JPEG ("image file is truncated").
void JpegEmitMessage(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
    JpegErrorExit(cinfo);
  }
}

template <typename F>
bool JpegTry(JpegError* err, F&& f) {
  if (setjmp(err->jump)) return false;
  f();
  return true;
}

}  // namespace

std::string SniffImageFormat(absl::string_view bytes) {
  if (bytes.size() >= 8 && bytes.substr(0, 8) == "\x89PNG\r\n\x1a\n") {
    return "png";
  }
  if (bytes.size() >= 3 && bytes.substr(0, 3) == "\xff\xd8\xff") {
    return "jpeg";
  }
  return "";
}

absl::StatusOr<Image> DecodeImage(absl::string_view bytes,
                                  absl::string_view source,
                                  const DecodeLimits& limits) {
  const std::string format = SniffImageFormat(bytes);
  if (format == "png") return DecodePng(bytes, source, limits);
  if (format == "jpeg") return DecodeJpeg(bytes, source, limits);
  return absl::InvalidArgumentError(absl::StrCat(
      source, ": not a PNG or JPEG image (", bytes.size(),
      " bytes starting with \"",
      absl::CHexEscape(bytes.substr(0, std::min<size_t>(bytes.size(), 8))),
      "\")"));
}

absl::StatusOr<Image> DecodePng(absl::string_view bytes,
                                absl::string_view source,
                                const DecodeLimits& limits) {
  if (SniffImageFormat(bytes) != "png") {
    return Corrupt(source, "PNG", "no PNG signature");
  }
  PngIo io;
  io.data = reinterpret_cast<const uint8_t*>(bytes.data());
  io.size = bytes.size();
  PngHandle h;
  h.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &io, PngErrorFn,
                                 PngWarningFn);
  if (h.png == nullptr) return absl::InternalError("png_create_read_struct");
  h.info = png_create_info_struct(h.png);
  if (h.info == nullptr) return absl::InternalError("png_create_info_struct");

  png_uint_32 width = 0, height = 0;
  const bool header_ok = PngTry(h.png, [&] {
    png_set_read_fn(h.png, &io, PngReadFn);
    png_set_user_limits(h.png, limits.max_side, limits.max_side);
    png_read_info(h.png, h.info);
    int depth = 0, color = 0;
    png_get_IHDR(h.png, h.info, &width, &height, &depth, &color, nullptr,
                 nullptr, nullptr);
    // To 8-bit RGB as PIL's convert("RGB"): no tRNS expansion, no gamma.
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(h.png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) {
      png_set_expand_gray_1_2_4_to_8(h.png);
    }
    if (depth == 16) png_set_strip_16(h.png);
    if (color & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(h.png);
    if (!(color & PNG_COLOR_MASK_COLOR)) png_set_gray_to_rgb(h.png);
  });
  if (!header_ok) return Corrupt(source, "PNG", io.message);
  absl::Status size_ok = CheckSize(width, height, source, limits);
  if (!size_ok.ok()) return size_ok;

  Image image;
  image.width = width;
  image.height = height;
  image.rgb.resize(static_cast<size_t>(width) * height * 3);
  size_t row_bytes = 0;
  const bool rows_ok = PngTry(h.png, [&] {
    const int passes = png_set_interlace_handling(h.png);
    png_read_update_info(h.png, h.info);
    row_bytes = png_get_rowbytes(h.png, h.info);
    if (row_bytes != static_cast<size_t>(width) * 3) {
      png_error(h.png, "unexpected row size after conversion to RGB");
    }
    for (int pass = 0; pass < passes; ++pass) {
      for (png_uint_32 y = 0; y < height; ++y) {
        png_read_row(h.png, image.rgb.data() + y * row_bytes, nullptr);
      }
    }
    png_read_end(h.png, nullptr);
  });
  if (!rows_ok) return Corrupt(source, "PNG", io.message);
  return image;
}

absl::StatusOr<Image> DecodeJpeg(absl::string_view bytes,
                                 absl::string_view source,
                                 const DecodeLimits& limits) {
  if (SniffImageFormat(bytes) != "jpeg") {
    return Corrupt(source, "JPEG", "no JPEG start-of-image marker");
  }
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = JpegErrorExit;
  err.mgr.emit_message = JpegEmitMessage;
  jpeg_create_decompress(&cinfo);
  struct Destroy {
    jpeg_decompress_struct* c;
    ~Destroy() { jpeg_destroy_decompress(c); }
  } destroy{&cinfo};

  bool cmyk = false;
  const bool header_ok = JpegTry(&err, [&] {
    jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()),
                 bytes.size());
    jpeg_read_header(&cinfo, TRUE);
    cmyk = cinfo.jpeg_color_space == JCS_CMYK ||
           cinfo.jpeg_color_space == JCS_YCCK;
    cinfo.out_color_space = JCS_RGB;
    cinfo.dct_method = JDCT_ISLOW;
    cinfo.do_fancy_upsampling = TRUE;
  });
  if (!header_ok) return Corrupt(source, "JPEG", err.message);
  if (cmyk) {
    return absl::UnimplementedError(
        absl::StrCat(source, ": CMYK/YCCK JPEG images are not supported"));
  }
  absl::Status size_ok =
      CheckSize(cinfo.image_width, cinfo.image_height, source, limits);
  if (!size_ok.ok()) return size_ok;

  Image image;
  image.width = cinfo.image_width;
  image.height = cinfo.image_height;
  image.rgb.resize(static_cast<size_t>(image.width) * image.height * 3);
  const bool pixels_ok = JpegTry(&err, [&] {
    jpeg_start_decompress(&cinfo);
    if (cinfo.output_components != 3 ||
        static_cast<int64_t>(cinfo.output_width) != image.width ||
        static_cast<int64_t>(cinfo.output_height) != image.height) {
      std::snprintf(err.message, sizeof err.message,
                    "unexpected output layout");
      std::longjmp(err.jump, 1);
    }
    while (cinfo.output_scanline < cinfo.output_height) {
      JSAMPROW row =
          image.rgb.data() +
          static_cast<size_t>(cinfo.output_scanline) * image.width * 3;
      jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
  });
  if (!pixels_ok) return Corrupt(source, "JPEG", err.message);
  return image;
}

absl::StatusOr<Image> ReadImageFile(const std::string& path,
                                    const DecodeLimits& limits) {
  absl::StatusOr<std::string> bytes = core::ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  return DecodeImage(*bytes, path, limits);
}

absl::StatusOr<std::string> EncodePng(const Image& image) {
  if (image.width <= 0 || image.height <= 0 ||
      image.rgb.size() != static_cast<size_t>(image.width * image.height * 3)) {
    return absl::InvalidArgumentError(
        absl::StrCat("EncodePng: ", image.width, "x", image.height,
                     " image with ", image.rgb.size(), " bytes"));
  }
  std::string out;
  PngIo io;
  io.out = &out;
  PngHandle h;
  h.write = true;
  h.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &io, PngErrorFn,
                                  PngWarningFn);
  if (h.png == nullptr) return absl::InternalError("png_create_write_struct");
  h.info = png_create_info_struct(h.png);
  if (h.info == nullptr) return absl::InternalError("png_create_info_struct");
  const bool ok = PngTry(h.png, [&] {
    png_set_write_fn(h.png, &io, PngWriteFn, PngFlushFn);
    png_set_IHDR(h.png, h.info, image.width, image.height, 8,
                 PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(h.png, h.info);
    for (int64_t y = 0; y < image.height; ++y) {
      png_write_row(h.png, image.rgb.data() + y * image.width * 3);
    }
    png_write_end(h.png, nullptr);
  });
  if (!ok) return absl::InternalError(absl::StrCat("EncodePng: ", io.message));
  return out;
}

}  // namespace verl::models::vlm
