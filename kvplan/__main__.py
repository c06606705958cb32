"""python -m kvplan, and the kvplan command (pyproject's entry point): Ctrl-C is taken over before the CLI's
modules load, so that it exits 130 without a traceback at any moment (kvplan.cli.interrupt)."""

from kvplan.cli.interrupt import INTERRUPTED, exit_at_once_on_ctrl_c, interrupt_on_ctrl_c


def main() -> None:
    exit_at_once_on_ctrl_c()
    import gc  # a built-in module

    gc.disable()  # for the start-up; kvplan.cli.app.main turns it back on for a command that does not end at once
    from kvplan.cli.app import end
    from kvplan.cli.app import main as command_line

    try:
        try:
            interrupt_on_ctrl_c()
            code = command_line()
        finally:
            exit_at_once_on_ctrl_c()  # what is left is the interpreter's shutdown
    except KeyboardInterrupt:
        code = INTERRUPTED
    end(code)


if __name__ == "__main__":
    main()
