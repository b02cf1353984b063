"""Marks for tests of what only POSIX systems have: the suite also runs on
Windows (scripts/windows-test.sh python, under Wine)."""
import os
import signal

import pytest

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork(): Windows has none")
needs_sigalrm = pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="SIGALRM: Windows has no alarm signal")
