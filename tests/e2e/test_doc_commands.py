"""Every shell command of README.md and docs/*.md runs here, so none goes stale.

Each command of a ```bash, ```sh, ```shell or ```console block (``$ `` lines) is one test, named by
its page, line and text. What "runs" means depends on what the command needs:

- offline commands run for real: ``agent-wait`` against one local stack shared by the module
  (``threads``, ``questions``, ``reply``, ``revoke``, ``tail --once``, ``dlq list``), with the
  doc's placeholders filled from that stack (``<question_id>``: a question raised for this command)
  and its thread ids made unique, so each command stands alone and the order does not matter;
- long or account-bound ``make`` targets (``demo``, ``test``, ``synth``, ``deploy``, ...) run as
  ``make -n``: the target and its variables exist, nothing is built; every ``-c key=value`` of
  ``CDK_ARGS`` or ``cdk`` names a context key the stack reads, and one without shell variables
  must be a valid configuration;
- commands that hold their terminal (``agent-wait local``, ``agent-wait inbox``, ``tail`` without
  ``--once``) and those aimed at a deployed api or AWS (``--api <ApiUrl>``, ``dlq`` without
  ``--endpoint-url``) parse with the CLI's own parser, so every subcommand and flag exists;
- ``aws <service> <operation> --flag ...``: the operation exists in botocore's model and every
  flag is one of its parameters or a global option of the AWS CLI;
- ``curl``: every option is one curl lists; ``.venv/bin/pip install -r FILE``: each requirement of
  a FILE in the repository is installed at a version it allows; ``source FILE``: FILE exists;
- everything else in a block (assignments, ``[ ... ]``, pipelines into ``openssl`` or ``jq``)
  must be valid bash (``bash -n``) and name programs that exist.

A block that is only an illustration is marked right before its fence with
``<!-- doc-test: skip <reason> -->``; the reason is required.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import eventually, http, start_local

from tests.doc_sections import ROOT, doc_pages

if TYPE_CHECKING:
    from collections.abc import Iterator

    from e2e_support import LocalProcess

SHELLS = {"bash", "sh", "shell", "console"}
SKIP = re.compile(r"^<!-- doc-test: skip(?P<reason>.*?)-->$")
# <question_id>, <subscriber queue URL>, <ApiUrl>: not a here-string (<<<) nor a JSON path (<$.body>).
PLACEHOLDER = re.compile(r"(?<![<\w])<([A-Za-z_][A-Za-z0-9_ .\-]*)>")
TOKEN = re.compile(r"PLACEHOLDER([0-9]+)X")
SAMPLE_INPUT = {"customer": "c-17", "amount": 40}
# Options of the AWS CLI itself, valid with every operation.
AWS_GLOBAL_OPTIONS = {
    "query", "output", "region", "profile", "endpoint-url", "no-cli-pager", "debug", "no-paginate",
    "cli-input-json", "cli-input-yaml", "generate-cli-skeleton", "no-verify-ssl", "color",
    "cli-binary-format", "page-size", "max-items", "starting-token", "no-sign-request",
}  # fmt: skip
# The AWS CLI's own names for some parameters (awscli.customizations.argrename), as
# (service, operation, parameter): flag.
AWS_CLI_RENAMES = {("sns", "subscribe", "endpoint"): "notification-endpoint"}
SHELL_WORDS = {"[", "[[", "test", "export", "cd", "echo", "printf", "read", "set", "if", "for", "while"}


class Stale(AssertionError):
    """A documented command that no longer does what the docs say."""


@dataclass(frozen=True)
class DocCommand:
    page: Path
    line: int
    text: str
    skip: str | None = None

    @property
    def where(self) -> str:
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{page}:{self.line}"


# -- extraction --------------------------------------------------------------------------------------


def _complete(text: str) -> bool:
    """Whether ``text`` is a whole command: no trailing backslash, no open quote."""
    if text.rstrip().endswith("\\"):
        return False
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return False
    return True


def commands_of(page: Path) -> list[DocCommand]:
    """The commands of every shell block of ``page``, one per logical line."""
    lines = page.read_text().splitlines()
    found: list[DocCommand] = []
    index = 0
    while index < len(lines):
        opening = re.match(r"^\s*```(\w+)\s*$", lines[index])
        if not opening:
            index += 1
            continue
        language = opening.group(1)
        before = next((lines[i].strip() for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        marker = SKIP.match(before)
        skip = marker.group("reason").strip() if marker else None
        end = next(i for i in range(index + 1, len(lines)) if lines[i].strip().startswith("```"))
        if language in SHELLS:
            found += _block_commands(page, lines, index + 1, end, language == "console", skip)
        index = end + 1
    return found


def _block_commands(
    page: Path, lines: list[str], start: int, end: int, console: bool, skip: str | None
) -> list[DocCommand]:
    found: list[DocCommand] = []
    current: list[str] = []
    first = 0
    for number in range(start, end):
        line = lines[number].strip() if not current else lines[number]
        if not current:
            if console:
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            if not line or line.startswith("#"):
                continue
            first = number + 1
        current.append(line)
        text = "\n".join(current)
        if _complete(text):
            found.append(DocCommand(page, first, text, skip))
            current = []
    if current:
        found.append(DocCommand(page, first, "\n".join(current) + "  # unterminated", skip))
    return found


def all_commands() -> list[DocCommand]:
    return [command for page in doc_pages() for command in commands_of(page)]


# -- shell structure ---------------------------------------------------------------------------------


def split_top_level(text: str) -> list[str]:
    """The simple commands of ``text``: split at ``|``, ``&&``, ``||``, ``;`` and newlines outside
    quotes and ``$( )``; comments dropped."""
    parts: list[str] = []
    current: list[str] = []
    quote: str | None = None
    depth = 0
    i = 0
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\" and quote == '"':
                current.append(text[i : i + 2])
                i += 2
                continue
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "\\" and text[i + 1 : i + 2] == "\n":
            i += 2
            current.append(" ")
            continue
        elif text.startswith("$(", i):
            depth += 1
            current.append("$(")
            i += 2
            continue
        elif char == ")" and depth:
            depth -= 1
        elif char == "#" and not depth and (not current or current[-1][-1:].isspace()):
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        elif not depth and (char in "|;\n" or text.startswith("&&", i)):
            parts.append("".join(current))
            current = []
            i += 2 if text.startswith(("&&", "||"), i) else 1
            continue
        current.append(char)
        i += 1
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def words_of(simple: str) -> list[str]:
    """The words of a simple command, its leading assignments left out; an assignment of a command
    substitution (``X=$(cmd ...)``) gives the words of ``cmd``."""
    assignment = re.match(r"^[A-Za-z_][A-Za-z0-9_]*\+?=", simple)
    if assignment and simple[assignment.end() :].startswith("$("):
        inner = split_top_level(simple[assignment.end() + 2 :].rsplit(")", 1)[0])
        return shlex.split(inner[0], comments=True) if inner else []
    words = shlex.split(simple, comments=True)
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*\+?=", words[0]):
        words.pop(0)
    return words


def simple_commands(text: str) -> list[list[str]]:
    """The word lists of every simple command worth checking in ``text``."""
    found: list[list[str]] = []
    for part in split_top_level(text):
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*\+?=\(", part):
            continue  # an array assignment: bash -n checks it
        words = words_of(part)
        if words:
            found.append(words)
    return found


# -- the checks --------------------------------------------------------------------------------------


@dataclass
class Stack:
    """The module's local stack, and what a command needs from it."""

    local: LocalProcess

    def question(self) -> str:
        """A question raised for one command: a new thread of the sample agent, parked."""
        thread_id = self.thread()
        parked = eventually(
            lambda: (
                (thread := http("GET", f"{self.local.api}/threads/{thread_id}")[2])["status"]
                in {"interrupted", "failed"}
                and thread
            ),
            what=f"{thread_id} parked",
        )
        assert parked["status"] == "interrupted", parked
        return str(parked["pending"][0])

    def decided(self) -> Path:
        """This stack's audit archive, holding at least one decided question: an audit query has
        something to read. The archive is written from the ledger's stream, a moment after the
        reply: wait for the file, not for a time."""
        folder = Path(self.local.info["audit archive"])
        if not any(folder.glob("audit/date=*/audit.jsonl")):
            question_id = self.question()
            _, _, question = http("GET", f"{self.local.api}/questions/{question_id}")
            status, _, body = http(
                "POST",
                f"{self.local.api}/questions/{question_id}/reply",
                {"answer": {"action": "approve"}},
                {"If-Match": f'"{question["digest"]}"'},
            )
            assert status == 202, body
            eventually(
                lambda: any(folder.glob("audit/date=*/audit.jsonl")), what=f"{question_id} in the archive"
            )
        return folder

    def thread(self, name: str = "doc") -> str:
        thread_id = f"{name}-{uuid.uuid4().hex[:8]}"
        status, _, body = http("POST", f"{self.local.api}/threads/{thread_id}/runs", {"input": SAMPLE_INPUT})
        assert status == 202, body
        return thread_id

    def fill(self, word: str) -> str | None:
        """The value of a placeholder, or None when the stack has none (an AWS resource)."""
        name = word.strip("<>").lower()
        if name.startswith("question_id"):
            return self.question()
        known = {"subscriber queue url": "subscriber queue", "outbox queue url": "outbox queue"}
        if name in known:
            return self.local.info[known[name]]
        if name == "moto endpoint":
            return self.local.info["moto"]
        return None


def check(command: DocCommand, stack: Any) -> str:
    """Run or check ``command``; returns what was done. Raises :class:`Stale`."""
    if command.text.endswith("# unterminated"):
        raise Stale(f"{command.where}: the command never ends (a trailing \\ or an open quote)")
    # A placeholder is one word the reader replaces: bash sees a plain word in its place.
    names: list[str] = []

    def token(match: re.Match[str]) -> str:
        names.append(match.group(0))
        return f"PLACEHOLDER{len(names) - 1}X"

    text = PLACEHOLDER.sub(token, command.text)
    syntax = subprocess.run(["bash", "-n", "-c", text], capture_output=True, text=True)
    if syntax.returncode:
        raise Stale(f"{command.where}: not valid bash: {syntax.stderr.strip()}")
    done = []
    for words in simple_commands(text):
        words = [TOKEN.sub(lambda match: names[int(match.group(1))], word) for word in words]
        done.append(check_words(words, command, stack))
    return "; ".join(done) or "bash -n"


def check_words(words: list[str], command: DocCommand, stack: Any) -> str:
    program = words[0]
    if program in {"agent-wait", ".venv/bin/agent-wait"}:
        return check_agent_wait(words[1:], command, stack)
    if program == "make":
        return check_make(words[1:], command)
    if program == "aws":
        return check_aws(words[1:], command)
    if program == "npx" and words[1:2] == ["cdk"]:
        return check_cdk(words[2:], command)
    if program == "curl":
        return check_curl(words[1:], command)
    if program in {"pip", ".venv/bin/pip"}:
        return check_pip(words[1:], command)
    if program in {"source", "."}:
        if not (ROOT / words[1]).is_file():
            raise Stale(f"{command.where}: {words[1]} does not exist (after make setup)")
        return f"{words[1]} exists"
    if program in SHELL_WORDS or shutil.which(program):
        return f"{program}: bash -n"
    raise Stale(f"{command.where}: no program {program!r}")


def _context_pairs(args: list[str], command: DocCommand) -> dict[str, str]:
    from infra.config import CONTEXT_KEYS

    pairs: dict[str, str] = {}
    for flag, value in zip(args, args[1:], strict=False):
        if flag in {"-c", "--context"}:
            key, sep, setting = value.partition("=")
            if not sep or key not in CONTEXT_KEYS:
                raise Stale(f"{command.where}: -c {value}: {key!r} is not a context key the stack reads")
            pairs[key] = setting
    return pairs


def _check_configuration(pairs: dict[str, str], command: DocCommand) -> str:
    """A configuration without shell variables or placeholders must be valid as written."""
    if not pairs or any(re.search(r"\$|<|\.\.\.", value) for value in pairs.values()):
        return f"context keys {sorted(pairs)} exist"
    from infra.config import ConfigError, StackConfig

    try:
        with contextlib.chdir(ROOT):
            StackConfig.from_context(pairs.get)
    except ConfigError as exc:
        raise Stale(f"{command.where}: the configuration is refused: {exc}") from exc
    return f"configuration {sorted(pairs)} valid"


def check_make(args: list[str], command: DocCommand) -> str:
    done = subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        raise Stale(f"{command.where}: make -n {shlex.join(args)}: {done.stderr.strip()[-500:]}")
    cdk_args = next((arg.split("=", 1)[1] for arg in args if arg.startswith("CDK_ARGS=")), None)
    if cdk_args is None:
        return f"make -n {shlex.join(args)}"
    pairs = _context_pairs(shlex.split(cdk_args), command)
    return f"make -n {args[0]}; " + _check_configuration(pairs, command)


@cache
def _cdk_help(subcommand: str) -> subprocess.CompletedProcess[str]:
    cdk = ROOT / "node_modules" / ".bin" / "cdk"
    if not cdk.exists():
        raise Stale(f"{cdk} is missing: make setup installs the pinned aws-cdk CLI")
    return subprocess.run([str(cdk), subcommand, "--help"], cwd=ROOT, capture_output=True, text=True)


def check_cdk(args: list[str], command: DocCommand) -> str:
    subcommand = args[0]
    if subcommand not in {"bootstrap", "deploy", "synth", "destroy", "diff", "list"}:
        raise Stale(f"{command.where}: cdk {subcommand}: not a cdk command")
    helped = _cdk_help(subcommand)
    if helped.returncode:
        raise Stale(f"{command.where}: cdk {subcommand} --help failed: {helped.stderr[-300:]}")
    return f"cdk {subcommand} exists; " + _check_configuration(_context_pairs(args, command), command)


def check_aws(args: list[str], command: DocCommand) -> str:
    import botocore.session
    from botocore import xform_name
    from botocore.exceptions import UnknownServiceError

    service, operation = args[0], args[1]
    session = botocore.session.get_session()
    try:
        model = session.get_service_model({"s3api": "s3"}.get(service, service))
    except UnknownServiceError as exc:
        raise Stale(f"{command.where}: aws {service}: no such service") from exc
    operations = {xform_name(name, "-"): name for name in model.operation_names}
    if operation not in operations:
        raise Stale(f"{command.where}: aws {service} {operation}: no such operation")
    shape = model.operation_model(operations[operation]).input_shape
    parameters = {
        AWS_CLI_RENAMES.get((service, operation, xform_name(name, "-")), xform_name(name, "-"))
        for name in (shape.members if shape else {})
    }
    for word in args[2:]:
        if word.startswith("--"):
            flag = word[2:].split("=", 1)[0]
            if flag not in parameters | AWS_GLOBAL_OPTIONS and flag.removeprefix("no-") not in parameters:
                raise Stale(f"{command.where}: aws {service} {operation} has no --{flag}")
    return f"aws {service} {operation}: operation and flags in botocore's model"


@cache
def _curl_options() -> frozenset[str]:
    listed = subprocess.run(["curl", "--help", "all"], capture_output=True, text=True).stdout
    return frozenset(re.findall(r"(?:^|\s)(-[A-Za-z0-9]|--[a-z0-9-]+)", listed))


def check_curl(args: list[str], command: DocCommand) -> str:
    for word in args:
        if re.match(r"^--?[A-Za-z]", word) and word.split("=", 1)[0] not in _curl_options():
            raise Stale(f"{command.where}: curl has no option {word}")
    return "curl options exist"


def check_pip(args: list[str], command: DocCommand) -> str:
    from packaging.requirements import Requirement

    if args[:2] != ["install", "-r"] or len(args) != 3:
        raise Stale(f"{command.where}: expected pip install -r FILE, got {shlex.join(args)}")
    path = Path(args[2]).expanduser()
    if not (ROOT / path).is_file() and not path.is_absolute():
        raise Stale(f"{command.where}: {args[2]} does not exist")
    if not (ROOT / path).is_file():
        return f"pip install -r {args[2]}: your own file, flags only"
    for line in (ROOT / path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        try:
            installed = metadata.version(requirement.name)
        except metadata.PackageNotFoundError as exc:
            raise Stale(f"{command.where}: {requirement.name} is not installed by make setup") from exc
        if not requirement.specifier.contains(installed, prereleases=True):
            raise Stale(f"{command.where}: {requirement} but make setup installs {installed}")
    return f"every requirement of {args[2]} installed"


def _parse(args: list[str], command: DocCommand, environ: dict[str, str]) -> Any:
    from agent_wait_cli.commands import build_parser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            return build_parser(environ).parse_args(args)
    except SystemExit as exc:
        if exc.code:
            raise Stale(f"{command.where}: agent-wait {shlex.join(args)}: {err.getvalue().strip()}") from exc
        return None  # --help


def _runs_here(parsed: Any, args: list[str]) -> bool:
    """Whether the command completes against the local stack (not one that holds the terminal, nor
    one aimed at a deployed api or AWS)."""
    if parsed is None or parsed.command in {"local", "inbox"}:
        return False
    if parsed.command == "tail":
        return bool(parsed.once or parsed.max)
    if parsed.command == "dlq":
        return parsed.action == "list" and parsed.endpoint_url is not None
    return "--api" not in args


def check_agent_wait(args: list[str], command: DocCommand, stack: Any) -> str:
    from agent_wait_cli import main

    placeholders = [word for word in args if PLACEHOLDER.fullmatch(word)]
    parse_args = ["QUESTION-ID" if PLACEHOLDER.fullmatch(word) else word for word in args]
    parsed = _parse(parse_args, command, dict(os.environ))
    if parsed is not None and parsed.command == "local":
        return _check_local(parsed, command)
    if not _runs_here(parsed, args) or stack is None:
        return "flags parse (" + ("holds its terminal or needs AWS" if parsed else "--help") + ")"
    local = stack()
    filled: list[str] = []
    for word in args:
        value = local.fill(word) if word in placeholders else word
        if value is None:
            return f"flags parse ({word} is an AWS resource)"
        filled.append(value)
    if parsed.command == "threads":
        position = filled.index(parsed.thread_id)
        filled[position] = (
            local.thread(parsed.thread_id)
            if parsed.action == "show"
            else (f"{parsed.thread_id}-{uuid.uuid4().hex[:8]}")
        )
    environ = {**os.environ, "AGENT_WAIT_API": local.local.api}
    if parsed.command == "audit" and parsed.action == "query":
        # This stack's archive by name: left to itself the CLI takes the newest local stack's, which
        # with tests running side by side may be another test's.
        environ["AGENT_WAIT_ARCHIVE_DIR"] = str(local.decided())
    out, err = io.StringIO(), io.StringIO()
    code = main(filled, out=out, err=err, environ=environ)
    if code != 0:
        what = f"agent-wait {shlex.join(filled)} exited {code}"
        raise Stale(f"{command.where}: {what}: {err.getvalue().strip()}")
    return f"ran against the local stack: agent-wait {shlex.join(filled)}"


def _check_local(parsed: Any, command: DocCommand) -> str:
    """``agent-wait local`` holds its terminal: its flags parse, and a graph source in the repository
    holds the graph's module."""
    source = Path(parsed.graph_source).expanduser() if parsed.graph_source else ROOT
    if not (ROOT / source).is_dir():
        return "flags parse (your own graph source)"
    module = parsed.graph.partition(":")[0].replace(".", "/")
    folder = ROOT / source
    if not ((folder / f"{module}.py").is_file() or (folder / module / "__init__.py").is_file()):
        raise Stale(f"{command.where}: --graph {parsed.graph}: no {module}.py in {folder}")
    return f"flags parse; {parsed.graph} found"


# -- the tests ---------------------------------------------------------------------------------------

COMMANDS = all_commands()


@pytest.fixture(scope="module")
def shared_stack() -> Iterator[Any]:
    """One local stack for every command of the module, started by the first command needing it."""
    started: list[Stack] = []

    def get() -> Stack:
        if not started:
            started.append(Stack(start_local()))
        return started[0]

    yield get
    for stack in started:
        assert stack.local.stop() == 0, "\n".join(stack.local.lines)


def run_doc_command(command: DocCommand, stack: Any) -> None:
    if command.skip is not None:
        assert command.skip, f"{command.where}: a doc-test skip needs a reason: <!-- doc-test: skip <why> -->"
        pytest.skip(command.skip)
    check(command, stack)


IDS = [f"{command.where} {command.text.splitlines()[0][:60]}" for command in COMMANDS]


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_the_documented_command_works(command: DocCommand, shared_stack: Any) -> None:
    run_doc_command(command, shared_stack)


def test_the_walkthrough_runs_against_the_stack(shared_stack: Any) -> None:
    # Not parse-only: the README's own CLI commands reach the local stack and succeed there.
    walkthrough = [c for c in COMMANDS if c.page.name == "README.md" and c.text.startswith("agent-wait")]
    assert len(walkthrough) >= 4
    for command in walkthrough:
        assert check(command, shared_stack).startswith("ran against the local stack"), command.where


def test_the_docs_have_commands_of_each_kind() -> None:
    # Not vacuous: the harness finds the commands the README and the docs are known to show.
    texts = [command.text for command in COMMANDS]
    assert len(COMMANDS) >= 40
    for start in ("make demo", "make test", "agent-wait reply", "aws sns subscribe", "make deploy"):
        assert any(text.startswith(start) for text in texts), start
    assert sum(command.skip is not None for command in COMMANDS) <= 3, "keep doc-test skips rare"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("make no-such-target", "No rule to make target"),
        ("make deploy CDK_ARGS='-c graph_sorce=x'", "is not a context key"),
        ("make synth CDK_ARGS='-c auth=ldap'", "configuration is refused"),
        ("agent-wait threads show t-1 --no-such-flag", "unrecognized arguments"),
        ("agent-wait questions shwo q-1", "invalid choice"),
        ("agent-wait local --graph-source examples --graph nope.graph:build_graph", "no nope/graph.py"),
        ("npx cdk deploy -c graph_sorce=x", "is not a context key"),
        ("npx cdk deplyo", "not a cdk command"),
        ("aws sqs create-queue --queue-name q --no-such-flag x", "has no --no-such-flag"),
        ("aws sqs create-cue --queue-name q", "no such operation"),
        ("curl --no-such-option https://example.com", "curl has no option"),
        ("source .venv/bin/no-such-file", "does not exist"),
        ("agnet-wait threads show t-1", "no program"),
        ("make demo 'unterminated", "never ends"),
    ],
)
def test_a_broken_command_fails_the_check(text: str, why: str) -> None:
    lines = text.splitlines()
    command = commands_of_text(lines)
    with pytest.raises(Stale, match=re.escape(why)):
        check(command, None)


def commands_of_text(lines: list[str]) -> DocCommand:
    """One command as if it stood alone in a ```bash block of a page."""
    page = ROOT / "docs" / "_broken.md"
    found = _block_commands(page, lines, 0, len(lines), False, None)
    return found[0]


def test_a_skip_without_a_reason_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- doc-test: skip -->\n```bash\nmake demo\n```\n")
    [command] = commands_of(page)
    assert command.skip == ""
    with pytest.raises(AssertionError, match="needs a reason"):
        run_doc_command(command, None)


def test_console_blocks_run_only_their_prompted_lines(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```console\n$ make demo\n[ok] output\n$ agent-wait \\\n  --help\n```\n```python\nx\n```")
    assert [command.text for command in commands_of(page)] == ["make demo", "agent-wait \\\n  --help"]


# -- links ---------------------------------------------------------------------------------------------


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of the page's headings."""
    anchors: set[str] = set()
    fenced = False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"^#{1,6} (.*)$", line)):
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            anchors.add(slug)
    return anchors


def test_every_relative_link_and_anchor_resolves() -> None:
    broken: list[str] = []
    for page in doc_pages():
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_readme_is_a_front_door() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    pages = ("http-api", "deploy", "operations", "local-stack", "your-own-agent", "security", "performance")
    for page in pages:
        assert f"(docs/{page}.md)" in readme, page


def test_the_docs_name_no_issue_numbers() -> None:
    for page in doc_pages():
        found = re.findall(r"(?<![\w/&])#\d{2,}\b", page.read_text())
        assert not found, f"{page.relative_to(ROOT)}: {found}"
