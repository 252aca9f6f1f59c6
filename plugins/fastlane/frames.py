"""Pixel helpers: normalise, downscale, tile a grid, encode PNG, draw in a terminal."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np


def as_frame(image: np.ndarray) -> np.ndarray:
    """An HxWxC uint8 view/copy of a rendered image (HxW grayscale becomes HxWx1)."""
    if image.ndim == 2:
        image = image[:, :, None]
    if image.ndim != 3 or image.shape[2] not in (1, 3, 4):
        raise ValueError(f"a frame must be HxW or HxWxC with C in 1, 3, 4; got shape {image.shape}")
    if image.dtype != np.uint8:
        if np.issubdtype(image.dtype, np.floating) and image.size and float(image.max()) <= 1.0:
            image = image * 255.0
        image = np.clip(image, 0, 255).astype(np.uint8)
    return image


def downscale(image: np.ndarray, max_dim: int) -> np.ndarray:
    """Nearest-neighbour downscale so that max(H, W) <= max_dim (a view when no copy is needed)."""
    height, width, channels = image.shape
    longest = max(height, width)
    if longest <= max_dim:
        return image
    if longest % max_dim == 0:
        factor = longest // max_dim
        return image[::factor, ::factor]  # an exact integer factor: a strided view, no copy
    rows, cols = _sample_indices(height, width, max_dim)
    # Taking whole pixels (one opaque item of C bytes each) is ~5x faster than fancy indexing.
    pixels = np.ascontiguousarray(image).view(np.dtype((np.void, channels))).reshape(height, width)
    return pixels.take(rows, axis=0).take(cols, axis=1).view(np.uint8).reshape(len(rows), len(cols), channels)


@lru_cache(maxsize=32)
def _sample_indices(height: int, width: int, max_dim: int) -> tuple[np.ndarray, np.ndarray]:
    scale = max_dim / max(height, width)
    rows = (np.arange(max(1, round(height * scale))) / scale).astype(np.intp)
    cols = (np.arange(max(1, round(width * scale))) / scale).astype(np.intp)
    return np.minimum(rows, height - 1), np.minimum(cols, width - 1)


def to_rgb(image: np.ndarray) -> np.ndarray:
    if image.shape[2] == 3:
        return image
    if image.shape[2] == 1:
        return np.repeat(image, 3, axis=2)
    return image[:, :, :3]


def compose_grid(tiles: list[np.ndarray], gap: int = 2) -> np.ndarray:
    """Tile frames (any sizes, any of GRAY/RGB/RGBA) into one RGB image, row-major."""
    if not tiles:
        raise ValueError("no tiles to compose")
    cols = math.ceil(math.sqrt(len(tiles)))
    rows = math.ceil(len(tiles) / cols)
    cell_h = max(t.shape[0] for t in tiles)
    cell_w = max(t.shape[1] for t in tiles)
    out = np.zeros((rows * cell_h + (rows - 1) * gap, cols * cell_w + (cols - 1) * gap, 3), np.uint8)
    for index, tile in enumerate(tiles):
        top, left = (index // cols) * (cell_h + gap), (index % cols) * (cell_w + gap)
        out[top : top + tile.shape[0], left : left + tile.shape[1]] = to_rgb(tile)
    return out


def encode_png(image: np.ndarray, level: int = 3) -> bytes:
    """A PNG file of an HxWxC uint8 image (GRAY, RGB or RGBA), encoded by Pillow."""
    import io

    from PIL import Image

    image = as_frame(np.asarray(image))
    buffer = io.BytesIO()
    Image.fromarray(image[:, :, 0] if image.shape[2] == 1 else image).save(buffer, format="PNG", compress_level=level)
    return buffer.getvalue()


def decode_png(data: bytes) -> np.ndarray:
    """An HxWxC uint8 array from PNG bytes (C = 1, 3 or 4)."""
    import io

    from PIL import Image, UnidentifiedImageError

    try:
        array = np.asarray(Image.open(io.BytesIO(data)))
    except UnidentifiedImageError:
        raise ValueError("not a PNG file") from None
    return array[:, :, None] if array.ndim == 2 else array


def terminal_image(image: np.ndarray, columns: int = 80) -> str:
    """The image as 24-bit-colour half blocks, ``columns`` characters wide."""
    rgb = to_rgb(as_frame(image))
    height, width = rgb.shape[:2]
    columns = max(1, min(columns, width))
    scale = columns / width
    rows = max(2, int(height * scale) // 2 * 2)
    small = rgb[(np.arange(rows) * height // rows)[:, None], (np.arange(columns) * width // columns)[None, :]]
    lines = []
    for top, bottom in zip(small[0::2], small[1::2]):
        cells = [f"\x1b[38;2;{a[0]};{a[1]};{a[2]}m\x1b[48;2;{b[0]};{b[1]};{b[2]}m\u2580" for a, b in zip(top, bottom)]
        lines.append("".join(cells) + "\x1b[0m")
    return "\n".join(lines)
