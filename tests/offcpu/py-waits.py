# SPDX-License-Identifier: LGPL-2.1-or-later
"""Python waits for test_offcpu.py: one thread blocked in queue.Queue.get()
(wait_on_queue), one in time.sleep() (sleepy), for argv[1] seconds."""
import queue
import sys
import threading
import time

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
q = queue.Queue()


def wait_on_queue():
    while q.get() is not None:
        pass


def sleepy(end):
    while time.monotonic() < end:
        time.sleep(0.05)


def main():
    end = time.monotonic() + SECONDS
    a = threading.Thread(target=wait_on_queue)
    b = threading.Thread(target=sleepy, args=(end,))
    a.start()
    b.start()
    print("ready", flush=True)
    # A few items: the getter wakes up, and waits again.
    while time.monotonic() < end:
        time.sleep(0.5)
        q.put(1)
    q.put(None)
    a.join()
    b.join()


main()
