"""Helpers shared by the command-line tests."""

from tfpack.cli import main


def tfpack(*argv):
    """The real `tfpack` entry point; argparse errors exit, so catch their status."""
    try:
        return main([str(a) for a in argv])
    except SystemExit as exit:
        return exit.code
