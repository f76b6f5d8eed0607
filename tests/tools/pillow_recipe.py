"""The article's scale_image in Pillow 9.4 (the reference recipe): open, convert('RGB'),
thumbnail((S, S), LANCZOS), paste centred on a white S x S canvas. Prints the canvas as hex for
each image path given, one JSON object per line: {"path", "w", "h", "hex"}."""
import json
import sys

from PIL import Image


def scale_image(path, size):
    img = Image.open(path).convert("RGB")
    img.thumbnail((size, size), Image.LANCZOS)
    canvas = Image.new("RGB", (size, size), (255, 255, 255))
    canvas.paste(img, ((size - img.width) // 2, (size - img.height) // 2))
    return img.size, canvas.tobytes()


if __name__ == "__main__":
    size = int(sys.argv[1])
    for p in sys.argv[2:]:
        (w, h), data = scale_image(p, size)
        print(json.dumps({"path": p, "w": w, "h": h, "hex": data.hex()}))
