"""The side channel's host end (mosaic_core.channel) on a busy machine: closing it while its queue is
full (the handler slow, the training processes having sent their last reports) delivers every queued
message and returns; it used to wait forever to send its own wake-up datagram into the full queue."""

import socket
import threading

from mosaic_core.channel import ChannelReceiver, ChannelSender, new_address


def test_close_with_a_full_queue_delivers_everything_and_returns():
    busy, got = threading.Event(), []

    def slow_handler(kind, payload):
        got.append(payload["n"])
        busy.wait()  # the host's thread is behind: the senders fill the queue meanwhile

    receiver = ChannelReceiver(new_address("full"), slow_handler).start()
    sender = ChannelSender(receiver.address)
    sent = 0
    while sender.send("report", {"n": sent}):  # best effort: the first refused one means the queue is full
        sent += 1
    assert sent >= 2, "the queue never filled"

    closing = threading.Thread(target=receiver.close)
    closing.start()
    threading.Timer(0.5, busy.set).start()  # the handler catches up once close has begun
    closing.join(timeout=60)
    assert not closing.is_alive(), "ChannelReceiver.close hung on a full queue"
    assert got == list(range(sent))
    # (The address is released: a sender now finds no one.)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as probe:
        try:
            probe.sendto(b"x", socket.MSG_DONTWAIT, b"\0" + receiver.address.encode())
        except OSError:
            pass
        else:
            raise AssertionError("the address is still bound after close")
