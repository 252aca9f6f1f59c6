"""Pixel helpers: downscale bounds, grids of mixed sizes, PNG round trips."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from mosaic_fastlane.frames import as_frame, compose_grid, decode_png, downscale, encode_png, terminal_image


@hsettings(max_examples=60, deadline=None)
@given(st.integers(1, 700), st.integers(1, 700), st.sampled_from([1, 3, 4]), st.integers(16, 512))
def test_downscale_fits_max_dim_and_keeps_the_aspect(height, width, channels, max_dim):
    image = np.zeros((height, width, channels), np.uint8)
    small = downscale(image, max_dim)
    assert max(small.shape[:2]) <= max_dim and small.shape[2] == channels and min(small.shape[:2]) >= 1
    if max(height, width) <= max_dim:
        assert small.shape == image.shape
    else:
        assert abs(small.shape[0] / small.shape[1] - height / width) <= max(
            2 / small.shape[1], 2 / small.shape[0]
        ) * max(1, height / width)


def test_downscale_samples_real_pixels():
    image = np.arange(400 * 600 * 3, dtype=np.uint32).reshape(400, 600, 3).astype(np.uint8)
    small = downscale(image, 512)
    assert small.shape == (341, 512, 3) and small[0, 0].tolist() == image[0, 0].tolist()
    assert downscale(image, 300).shape == (200, 300, 3)  # an exact factor: a strided view
    assert downscale(image, 300).base is image


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_png_round_trip(channels):
    image = np.random.default_rng(channels).integers(0, 256, (13, 7, channels), dtype=np.uint8)
    data = encode_png(image)
    assert data.startswith(b"\x89PNG") and np.array_equal(decode_png(data), image)


def test_png_is_readable_by_pillow(tmp_path):
    from PIL import Image

    image = np.random.default_rng(0).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    (tmp_path / "f.png").write_bytes(encode_png(image))
    assert np.array_equal(np.asarray(Image.open(tmp_path / "f.png")), image)


def test_grid_of_mixed_sizes_and_formats_is_rgb():
    tiles = [np.full((10, 20, 3), 1, np.uint8), np.full((5, 5, 1), 2, np.uint8), np.full((12, 8, 4), 3, np.uint8)]
    grid = compose_grid(tiles, gap=2)
    assert grid.shape == (2 * 12 + 2, 2 * 20 + 2, 3)
    assert (grid[:10, :20] == 1).all() and (grid[:5, 22:27] == 2).all() and (grid[14:26, :8] == 3).all()
    assert (grid[10:12, :20] == 0).all()  # padding stays black


def test_as_frame_normalises_and_rejects():
    assert as_frame(np.zeros((4, 5))).shape == (4, 5, 1)
    assert as_frame(np.ones((2, 2, 3), np.float32)).max() == 255
    with pytest.raises(ValueError, match="C in 1, 3, 4"):
        as_frame(np.zeros((4, 5, 2)))


def test_terminal_image_has_one_line_per_two_rows():
    text = terminal_image(np.zeros((40, 80, 3), np.uint8), columns=20)
    assert len(text.splitlines()) == 5 and "\u2580" in text
