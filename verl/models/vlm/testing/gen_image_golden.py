#!/usr/bin/python3
"""Golden data for verl/models/vlm's image decoding and Qwen2-VL processor.

Run with Debian's /usr/bin/python3 (python3-pil, python3-numpy):
    /usr/bin/python3 verl/models/vlm/testing/gen_image_golden.py
Writes verl/models/vlm/testdata/. The processor reference follows HF's
Qwen2VLImageProcessor (transformers/models/qwen2_vl/image_processing_qwen2_vl.py)
step by step: smart_resize, PIL resize(BICUBIC), rescale (float64 then float32),
normalize (float32), reshape/transpose to pixel_values.
"""
import io
import json
import math
import os

import numpy as np
from PIL import Image

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata")
MEAN = [0.48145466, 0.4578275, 0.40821073]
STD = [0.26862954, 0.26130258, 0.27577711]


def smart_resize(height, width, factor=28, min_pixels=56 * 56, max_pixels=28 * 28 * 1280):
    if max(height, width) / min(height, width) > 200:
        raise ValueError("aspect")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def preprocess(img, min_pixels, max_pixels, patch=14, merge=2, tps=2):
    """HF Qwen2VLImageProcessor._preprocess for one image."""
    img = img.convert("RGB")
    h, w = smart_resize(img.height, img.width, patch * merge, min_pixels, max_pixels)
    resized = img.resize((w, h), resample=Image.BICUBIC)
    x = np.array(resized)  # HWC uint8
    x = (x.astype(np.float64) * (1 / 255)).astype(np.float32)
    x = (x - np.array(MEAN, dtype=np.float32)) / np.array(STD, dtype=np.float32)
    patches = x.transpose(2, 0, 1)[np.newaxis]  # [1, C, H, W]
    patches = np.concatenate([patches] * tps, axis=0)
    c = patches.shape[1]
    gh, gw = h // patch, w // patch
    patches = patches.reshape(1, tps, c, gh // merge, merge, patch, gw // merge, merge, patch)
    patches = patches.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    flat = patches.reshape(gh * gw, c * tps * patch * patch)
    return resized, flat, (1, gh, gw)


def synthetic(w, h, seed, smooth):
    """Noise (small images) or gradients with stripes and a disc (larger)."""
    rng = np.random.default_rng(seed)
    if not smooth:
        return Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 127 + 127 * np.sin(xx / (3 + seed % 5) + yy / 17)
    g = 255 * xx / max(w - 1, 1)
    b = np.where(((xx - w / 3) ** 2 + (yy - h / 2) ** 2) < (min(w, h) / 3) ** 2, 230, 20)
    b = b + 20 * ((xx.astype(int) // 4) % 2)
    return Image.fromarray(np.stack([r, g, b], -1).clip(0, 255).astype(np.uint8))


def write(path, data):
    with open(os.path.join(OUT, path), "wb") as f:
        f.write(data)


def encoded(img, fmt, **kw):
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def decode_cases():
    """Small files in several PNG/JPEG flavours with PIL's RGB decoding."""
    base = synthetic(13, 9, 1, smooth=False)
    smooth = synthetic(37, 21, 2, smooth=True)
    rgba = base.convert("RGBA")
    rgba.putalpha(Image.fromarray(np.arange(13 * 9, dtype=np.uint8).reshape(9, 13)))
    cases = {
        "rgb.png": encoded(base, "PNG"),
        "rgba.png": encoded(rgba, "PNG"),
        "gray.png": encoded(base.convert("L"), "PNG"),
        "gray_alpha.png": encoded(base.convert("LA"), "PNG"),
        "palette.png": encoded(smooth.convert("P", palette=Image.ADAPTIVE, colors=16), "PNG"),
        "bilevel.png": encoded(base.convert("1"), "PNG"),
        "interlaced.png": encoded(smooth, "PNG", interlace=1),
        "rgb16.png": None,  # written below from raw 16-bit data
        "baseline.jpg": encoded(smooth, "JPEG", quality=90),
        "subsampled420.jpg": encoded(smooth, "JPEG", quality=75, subsampling=2),
        "progressive.jpg": encoded(smooth, "JPEG", quality=80, progressive=True),
        "gray.jpg": encoded(smooth.convert("L"), "JPEG", quality=85),
    }
    cases["rgb16.png"] = png_rgb16(np.asarray(smooth).astype(np.uint16) * 257 + 3)
    for name, data in cases.items():
        write(os.path.join("decode", name), data)
        rgb = np.array(Image.open(io.BytesIO(data)).convert("RGB"))
        write(os.path.join("decode", name + ".rgb"), rgb.tobytes())
    return sorted(cases)


def png_rgb16(arr):
    """A 16-bit RGB PNG by hand (PIL cannot write one)."""
    import struct
    import zlib
    h, w, _ = arr.shape
    raw = b"".join(b"\x00" + arr[y].astype(">u2").tobytes() for y in range(h))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def processor_cases():
    """20 images of odd sizes; resized images and grids for all, full
    pixel_values for the first three."""
    small = [(7, 31), (23, 17), (29, 29), (41, 13), (5, 5), (55, 27), (15, 97)]
    large = [(251, 97), (97, 251), (300, 200), (143, 143), (257, 63), (199, 301),
             (120, 91), (333, 111), (61, 401), (180, 179), (73, 275), (402, 67)]
    # (min_pixels, max_pixels): defaults for some, small budgets elsewhere.
    budgets = [(3136, 1003520), (3136, 28 * 28 * 6), (28 * 28 * 2, 28 * 28 * 4),
               (56 * 56 * 2, 28 * 28 * 9)]
    cases = []
    sizes = [(w, h, False) for w, h in small] + [(w, h, True) for w, h in large]
    assert len(sizes) >= 19
    sizes.append((211, 157, True))
    for i, (w, h, smooth) in enumerate(sizes):
        img = synthetic(w, h, 100 + i, smooth)
        min_p, max_p = budgets[i % len(budgets)]
        if i < 3:
            min_p, max_p = 28 * 28, 28 * 28 * 2  # full pixel_values: keep small
        elif w * h > 40000:
            min_p, max_p = budgets[1]  # keep the checked-in output small
        resized, flat, grid = preprocess(img, min_p, max_p)
        name = "img%02d" % i
        write(os.path.join("proc", name + ".png"), encoded(img, "PNG", optimize=True))
        write(os.path.join("proc", name + "_resized.png"), encoded(resized, "PNG", optimize=True))
        case = {"name": name, "min_pixels": min_p, "max_pixels": max_p, "grid_thw": list(grid)}
        if i < 3:
            write(os.path.join("proc", name + "_pixel_values.f32"), flat.astype("<f4").tobytes())
            case["pixel_values"] = name + "_pixel_values.f32"
        cases.append(case)
    return cases


def smart_resize_table():
    rows = []
    for h, w, lo, hi in [(42, 42, 3136, 1003520), (70, 70, 3136, 1003520),
                         (14, 98, 3136, 1003520), (1000, 1000, 3136, 1003520),
                         (4000, 3000, 3136, 1003520), (10, 1999, 3136, 1003520),
                         (1, 1, 3136, 1003520), (3, 500, 3136, 1003520),
                         (479, 640, 256 * 28 * 28, 1280 * 28 * 28), (1080, 1920, 3136, 12845056),
                         (98, 126, 3136, 3136), (33, 47, 100, 100000), (5000, 25, 3136, 50000)]:
        rows.append({"h": h, "w": w, "min_pixels": lo, "max_pixels": hi,
                     "out": list(smart_resize(h, w, 28, lo, hi))})
    return rows


def main():
    for sub in ("decode", "proc"):
        os.makedirs(os.path.join(OUT, sub), exist_ok=True)
    golden = {"decode": decode_cases(), "processor": processor_cases(),
              "smart_resize": smart_resize_table()}
    with open(os.path.join(OUT, "image_golden.json"), "w") as f:
        json.dump(golden, f, indent=1)


if __name__ == "__main__":
    main()
