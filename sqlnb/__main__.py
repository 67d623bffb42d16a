"""``python -m sqlnb``: the same command line as the ``sqlnb`` script."""

from sqlnb.cli import main

if __name__ == "__main__":
    main()
