"""Developer sessions: ``nox -s tests lint typecheck docker``."""

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = True


@nox.session(python="3.11")
def tests(session: nox.Session) -> None:
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session(python="3.11")
def docker(session: nox.Session) -> None:
    session.install("-e", ".[test]")
    session.run("bash", "ci/docker-up.sh", external=True)
    session.run("pytest", "-m", "docker", *session.posargs, env={"HARNESS_REQUIRE_DOCKER": "1"})


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "harness", "tests", "bench")
    session.run("ruff", "format", "--check", "harness")


@nox.session(python="3.11")
def typecheck(session: nox.Session) -> None:
    session.install("-e", ".[dev]")
    session.run("mypy")
