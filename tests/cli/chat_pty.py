"""attn-cli chat on a pseudo-terminal, as a user at a terminal drives it.

  chat_pty.py exit ATTN_CLI MODEL TEMPLATE
      the "> " prompt before each turn, a reply, /exit: prints what the terminal showed (stderr
      is the terminal too); exit status 0 when the conversation ended by /exit with status 0.
  chat_pty.py interrupt ATTN_CLI MODEL TEMPLATE
      Ctrl-C during a reply stops the reply and the conversation goes on; Ctrl-C at the prompt
      ends the process (killed by SIGINT, 130 in a shell), and Ctrl-D at the prompt ends it
      with 0. The terminal's output is paused by Ctrl-S before the turn, so the reply is
      certainly under way (attn-cli blocked writing its first piece) when Ctrl-C comes. Prints
      what the terminal showed (stdout only: stderr to a file, printed to stderr); exit status 0
      when each ending was as documented.
"""
import os
import pty
import select
import signal
import sys
import tempfile
import termios
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


def spawn(argv, stderr_path=None):
    """argv on a new pseudo-terminal. With stderr_path: stderr goes there, and the terminal
    neither echoes the input nor turns "\\n" into "\\r\\n" nor drops its output on Ctrl-C
    (NOFLSH), so what it shows is stdout's bytes."""
    pid, fd = pty.fork()
    if pid == 0:
        if stderr_path:
            err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(err, 2)
            attrs = termios.tcgetattr(0)
            attrs[1] &= ~termios.ONLCR
            attrs[3] &= ~termios.ECHO
            attrs[3] |= termios.NOFLSH
            termios.tcsetattr(0, termios.TCSANOW, attrs)
        os.execv(argv[0], argv)
    return pid, fd


def blocked_in_write(pid, seconds=60):
    """Waits until the process's main thread sleeps in write(2) (syscall 1 on x86-64, 64 on
    arm64: /proc/PID/syscall's first field)."""
    calls = {"x86_64": "1", "aarch64": "64"}.get(os.uname().machine, "1")
    end = time.time() + seconds
    while time.time() < end:
        try:
            with open(f"/proc/{pid}/syscall") as f:
                if f.read().split()[0] == calls:
                    return True
        except (OSError, IndexError):
            return False
        time.sleep(0.05)
    return False


def exit_mode(cli, model, template):
    pid, fd = spawn([cli, "chat", "-m", model, "--chat-template", template, "-n", "4"])
    shown = read_until(fd, b"> ")
    os.write(fd, b"Once upon a time\n")
    shown += read_until(fd, b"> ")  # the reply, then the next turn's prompt
    os.write(fd, b"/exit\n")
    _, status = os.waitpid(pid, 0)
    shown += read_until(fd, b"\0", 1)
    sys.stdout.write(shown.decode("utf-8", "replace"))
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def interrupt_mode(cli, model, template):
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        err = os.path.join(tmp, "stderr")
        argv = [cli, "chat", "-m", model, "--chat-template", template, "-n", "64", "--temp", "0"]
        pid, fd = spawn(argv, err)
        shown = read_until(fd, b"> ")
        os.write(fd, b"\x13")  # Ctrl-S: the terminal's output paused
        os.write(fd, b"Once upon a time\n")
        if not blocked_in_write(pid):
            print("FAIL: the reply never blocked on the paused terminal", file=sys.stderr)
            ok = False
        os.write(fd, b"\x03")  # Ctrl-C during the reply (it also resumes the output)
        shown += read_until(fd, b"> ")
        os.write(fd, b"The end\n")
        shown += read_until(fd, b"> ")
        os.write(fd, b"\x03")  # Ctrl-C at the prompt: the process ends
        _, status = os.waitpid(pid, 0)
        shown += read_until(fd, b"\0", 1)
        os.close(fd)
        if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGINT):
            print(f"FAIL: Ctrl-C at the prompt: wait status {status}", file=sys.stderr)
            ok = False
        with open(err, encoding="utf-8", errors="replace") as f:
            sys.stderr.write(f.read())
        # Ctrl-D at the prompt: the end of input, exit 0.
        pid, fd = spawn(argv, err)
        read_until(fd, b"> ")
        os.write(fd, b"\x04")
        _, status = os.waitpid(pid, 0)
        os.close(fd)
        if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
            print(f"FAIL: Ctrl-D at the prompt: wait status {status}", file=sys.stderr)
            ok = False
    sys.stdout.write(shown.decode("utf-8", "replace"))
    return ok


def main():
    mode, cli, model, template = sys.argv[1:5]
    ok = {"exit": exit_mode, "interrupt": interrupt_mode}[mode](cli, model, template)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
