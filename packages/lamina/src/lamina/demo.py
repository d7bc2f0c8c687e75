"""The lamina demo (grows as the layers land)."""

from lamina import __version__


def main() -> None:
    print(f"lamina {__version__}")


if __name__ == "__main__":
    main()
