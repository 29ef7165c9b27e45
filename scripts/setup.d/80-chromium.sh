#!/usr/bin/env bash
# Debian's headless-capable Chromium: the report tests (tests/cli/report_cli.rs)
# render every kind of `tdg report` page in a real browser, read the DOM it
# built and its console, and the README's screenshot of a campaign page is
# made with its --screenshot. DejaVu gives the pages' text a font to measure.
set -euo pipefail
. "$TDG_ROOT/scripts/lib/common.sh"
apt_install chromium fonts-dejavu-core
