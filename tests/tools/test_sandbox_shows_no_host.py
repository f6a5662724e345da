"""What code in the bubblewrap sandbox can learn about the host: no path, user, machine name or boot option.

Each test runs real code through `code_execute` in the real sandbox, as an adversary's model would, and
reads what it printed (decision 391). Skipped only where bwrap does not work here.
"""

from __future__ import annotations

import os
from pathlib import Path

from klaw.home import KlawHome
from tests.tools.sandbox_helpers import Runner, home_with_secrets

# Every process the sandbox can see: its command line and environment, NUL bytes shown as spaces.
_PROCESSES = """
import os
for pid in sorted(p for p in os.listdir('/proc') if p.isdigit()):
    for name in ('cmdline', 'environ'):
        with open(f'/proc/{pid}/{name}', 'rb') as f:
            print(pid, name, f.read().replace(bytes(1), b' ').decode())
print('kernel options:', repr(open('/proc/cmdline').read()))
"""


async def _run(home: KlawHome, code: str, **config: object) -> str:
    """What `code` printed; its errors too, so an assertion shows why it stopped."""
    result = await Runner(home, backend="bubblewrap", **config).run(code)
    return result.content


async def test_no_process_in_the_sandbox_names_a_host_path_nor_the_kernel_its_boot_options(tmp_path: Path) -> None:
    """bwrap is the sandbox's pid 1: its command line named the workspace's host path (so KLAW_HOME's and
    the person's user name) and every bind; its environment, klaw's working directory."""
    home = home_with_secrets(tmp_path)
    said = await _run(home, _PROCESSES)
    assert "1 cmdline" in said and "1 environ" in said  # bwrap's own were read
    for host_path in {str(home.root), str(home.workspace.resolve()), str(tmp_path), os.getcwd()} - {"/"}:
        assert host_path not in said
    assert "--bind" not in said and "--ro-bind" not in said
    assert "kernel options: ''" in said


async def test_passwd_and_group_name_only_the_sandbox_user(tmp_path: Path) -> None:
    """The host's /etc/passwd and /etc/group listed its accounts (root, postgres, the person's)."""
    code = "\n".join(
        [
            "import getpass, grp, os, pwd",
            "print('users', sorted(u.pw_name for u in pwd.getpwall()))",
            "print('groups', sorted(g.gr_name for g in grp.getgrall()))",
            "print('me', getpass.getuser(), pwd.getpwuid(os.getuid()).pw_dir, grp.getgrgid(os.getgid()).gr_name)",
        ]
    )
    said = await _run(home_with_secrets(tmp_path), code)
    assert "users ['nobody', 'sandbox']" in said
    assert "groups ['nogroup', 'sandbox']" in said
    assert "me sandbox /tmp sandbox" in said


async def test_the_sandbox_names_only_itself_and_localhost(tmp_path: Path) -> None:
    """The host's /etc/hosts named its machines and resolv.conf its name server; without a network the
    sandbox has neither, and its own hostname resolves to the loopback."""
    code = "\n".join(
        [
            "import os, socket",
            "etc_hostname = open('/etc/hostname').read().strip() if os.path.exists('/etc/hostname') else None",
            "print('hostname', socket.gethostname(), etc_hostname)",
            "names = {w for line in open('/etc/hosts') for w in line.split('#')[0].split()[1:]}",
            "print('hosts', sorted(names))",
            "print('resolv.conf', os.path.exists('/etc/resolv.conf'))",
            "print('resolves', socket.gethostbyname(socket.gethostname()), socket.gethostbyname('localhost'))",
        ]
    )
    said = await _run(home_with_secrets(tmp_path), code)
    assert "hosts ['ip6-localhost', 'ip6-loopback', 'localhost', 'sandbox']" in said
    assert "resolv.conf False" in said
    assert "hostname sandbox sandbox" in said
    assert "resolves 127.0.0.1 127.0.0.1" in said


async def test_with_the_network_names_resolve_as_on_the_host_and_the_users_stay_hidden(tmp_path: Path) -> None:
    """`sandbox.network: true` keeps the host's hosts and resolv.conf, which names on that network need."""
    code = "\n".join(
        [
            "import os, pwd",
            "for name in ('hosts', 'resolv.conf'):",
            "    path = '/etc/' + name",
            "    print(name, repr(open(path).read() if os.path.exists(path) else None))",
            "print('users', sorted(u.pw_name for u in pwd.getpwall()))",
        ]
    )
    said = await _run(home_with_secrets(tmp_path), code, network=True)
    for name in ("hosts", "resolv.conf"):
        host = Path("/etc", name)
        assert f"{name} {host.read_text() if host.exists() else None!r}" in said
    assert "users ['nobody', 'sandbox']" in said


async def test_what_was_already_hidden_stays_hidden(tmp_path: Path) -> None:
    """Closed before decision 391, kept so: other processes, klaw's descriptors, the host's /home, /root,
    /run, /sys, /var and /tmp, its environment, its hostname, root."""
    code = "\n".join(
        [
            "import os, socket",
            "print('pids', len([p for p in os.listdir('/proc') if p.isdigit()]))",
            "print('fds', sorted(int(fd) for fd in os.listdir('/proc/self/fd')))",
            "print('absent', [p for p in ('/home', '/root', '/run', '/sys', '/var', '/opt') if not os.path.exists(p)])",
            "print('tmp', os.listdir('/tmp'))",
            "print('env', sorted(os.environ))",
            "print('uid', os.getuid(), 'host', socket.gethostname())",
        ]
    )
    said = await _run(home_with_secrets(tmp_path), code)
    assert "pids 2\n" in said  # bwrap's pid 1 and the code
    assert "fds [0, 1, 2, 3]" in said  # stdin, stdout, stderr and the listing's own
    assert "absent ['/home', '/root', '/run', '/sys', '/var', '/opt']" in said
    assert "tmp []" in said
    for name in ("HOME", "PATH"):
        assert f"'{name}'" in said
    assert "KLAW" not in said and "API_KEY" not in said
    assert "uid 0 " not in said and " host sandbox" in said
