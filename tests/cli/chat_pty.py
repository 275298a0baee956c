"""attn-cli chat on a pseudo-terminal: the "> " prompt before each turn, a reply per line, /exit.

Usage: chat_pty.py ATTN_CLI MODEL TEMPLATE. Prints what the terminal showed; exit status 0 when
the conversation ended by /exit with status 0, 1 otherwise.
"""
import os
import pty
import select
import sys
import time


def read_until(fd, text, seconds=30):
    seen = b""
    end = time.time() + seconds
    while text not in seen and time.time() < end:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    return seen


def main():
    cli, model, template = sys.argv[1:4]
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(cli, [cli, "chat", "-m", model, "--chat-template", template, "-n", "4"])
    shown = read_until(fd, b"> ")
    os.write(fd, b"Once upon a time\n")
    shown += read_until(fd, b"> ")  # the reply, then the next turn's prompt
    os.write(fd, b"/exit\n")
    _, status = os.waitpid(pid, 0)
    shown += read_until(fd, b"\0", 1)
    sys.stdout.write(shown.decode("utf-8", "replace"))
    sys.exit(0 if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else 1)


main()
