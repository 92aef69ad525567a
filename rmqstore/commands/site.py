"""``rmqstore site [--out DIR] [--notebooks PATH ...] [--no-execute]``: the documentation site."""

from __future__ import annotations

import argparse

from .terminal import EXIT_OK, PROG, Command, Streams, positive_int

__all__ = ["COMMAND"]


def _site_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="site", help="output directory (default: site/)")
    p.add_argument("--notebooks", nargs="+", metavar="PATH",
                   help="a directory of notebooks or notebook files, in order (default: notebooks/)")
    p.add_argument("--no-execute", action="store_true", help="export the saved outputs without running")
    p.add_argument("--timeout", type=positive_int, default=600, help="seconds per cell (default: 600)")


def _site(args: argparse.Namespace, io: Streams) -> int:
    from rmqstore.widgets.site import build_site  # Jupyter imports only for this command

    def log(line: str) -> None:  # a stderr that is no terminal (a log file, CI) gets lines, not a bar
        io.stderr.write(f"{PROG} site: {line}\n")
        io.stderr.flush()

    site = build_site(args.out, args.notebooks, execute=not args.no_execute, timeout=args.timeout,
                      progress=io.stderr_is_tty, log=None if io.stderr_is_tty else log)
    for page in site.pages:
        io.stdout.write(f"{page.html_path}  {page.title}  ({page.seconds:.1f} s)\n")
    io.stdout.write(f"{site.index}\n")
    return EXIT_OK


COMMAND = Command("build the documentation site: every notebook executed, its views working with no kernel",
                  _site_arguments, _site)
