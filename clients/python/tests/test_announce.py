"""A recording Python process announces itself the way the Rust and C runtime does: the
abstract unix socket @p5-runtime-PID, by which host agents find it (issue 14 item 2)."""

import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

CLIENT = str(pathlib.Path(__file__).resolve().parents[1])

SCRIPT = r"""
import os, p5
p5.enter(0x61)
p5.exit(0x61)
name = "@p5-runtime-%d" % os.getpid()
with open("/proc/net/unix") as f:
    print(any(line.split()[-1] == name for line in f if line.split()))
"""


class AnnounceTest(unittest.TestCase):
    def test_a_recording_process_binds_its_announcement(self):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, PYTHONPATH=CLIENT, P5_DIR=d)
            env.pop("P5_LOGSERVER", None)
            env.pop("P5_DISABLE", None)
            out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, check=True,
                                 capture_output=True, text=True).stdout.split()
        self.assertEqual(out, ["True"])


if __name__ == "__main__":
    unittest.main()
