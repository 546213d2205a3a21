"""Shared by the programs of the python_sockets test: where the server says its port."""
import os
import sys
import time


def publish_port(path, port):
    """Writes the port to `path` atomically (the client waits for the file)."""
    with open(path + ".tmp", "w") as f:
        f.write(str(port))
    os.rename(path + ".tmp", path)


def wait_port(path, seconds=30):
    deadline = time.time() + seconds
    while not os.path.exists(path):
        if time.time() > deadline:
            sys.exit("no server after %d s" % seconds)
        time.sleep(0.01)
    with open(path) as f:
        return int(f.read())
