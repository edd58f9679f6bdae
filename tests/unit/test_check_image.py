"""An image is checked by decoding it, once per content in a process; a bad file never passes."""

import cv2
import numpy as np
import pytest

from argus_dagster.infra import media
from argus_dagster.infra.media import MediaError, check_image


def test_a_content_decoded_once_is_not_decoded_again_and_a_bad_one_always_fails(tmp_path, monkeypatch):
    decodes = []
    real = cv2.imread
    monkeypatch.setattr(media.cv2, "imread", lambda *a: decodes.append(a[0]) or real(*a))
    monkeypatch.setattr(media, "_GOOD_IMAGES", {})
    img = np.random.default_rng(0).integers(0, 255, (40, 50, 3), dtype=np.uint8)
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    cv2.imwrite(str(a), img)
    b.write_bytes(a.read_bytes())  # the same still under another name (another input's subject image)
    check_image(str(a))
    check_image(str(b))
    check_image(str(a))
    assert decodes == [str(a)]

    bad = tmp_path / "bad.png"
    bad.write_text("not an image")
    for _ in range(2):
        with pytest.raises(MediaError, match="not a readable image"):
            check_image(str(bad))
    assert decodes == [str(a), str(bad), str(bad)]
    a.write_text("replaced by text")  # the same name, another content: decoded again, and refused
    with pytest.raises(MediaError, match="not a readable image"):
        check_image(str(a))
