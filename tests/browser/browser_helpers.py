"""Helpers the browser tests share: driving a notebook in the JupyterLab UI.

(A module of its own so tests can import it: ``from .browser_helpers import ...``.)

Everything is scoped to the notebook's own panel (``NotebookUI.panel``): JupyterLab keeps
other documents' panels in the DOM, hidden, and a selector over the whole page would read
their prompts and outputs.  Each test opens its notebook in a workspace of its own, so tabs
left by an earlier test are not restored into it.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

TRACEBACK = "Traceback (most recent call last)"


@dataclass
class NotebookUI:
    page: object
    panel: object  # Locator of the notebook's .jp-NotebookPanel
    tab: object  # Locator of its tab in the main dock panel

    def outputs(self):
        return self.panel.locator(".jp-OutputArea-output")

    def output_texts(self) -> list[str]:
        return self.outputs().all_text_contents()

    def errors(self) -> list[str]:
        """Tracebacks shown in the notebook's output areas."""
        return [t for t in self.output_texts() if TRACEBACK in t]

    def prompts(self) -> list[str]:
        return self.panel.locator(".jp-CodeCell .jp-InputPrompt").all_text_contents()

    def wait_for_view(self, testid: str, timeout_ms: int = 30_000):
        """The first element ``data-testid=testid`` in an output area; on a timeout, fail with
        what the outputs show instead (a text/plain repr such as ``Counter(value=0)`` means
        the widget front end -- anywidget's or ipywidgets' lab extension -- did not load)."""
        view = self.outputs().locator(f"[data-testid='{testid}']").first
        try:
            view.wait_for(timeout=timeout_ms)
        except Exception:  # noqa: BLE001 - replaced by a message that says what is on screen
            shown = "\n".join(t[:200] for t in self.output_texts())
            raise AssertionError(f"no [data-testid={testid!r}] rendered in {timeout_ms / 1000:.0f} s; "
                                 f"the outputs show:\n{shown}") from None
        return view

    def wait_kernel_idle(self, timeout_ms: int = 60_000) -> None:
        """Wait for a real kernel that is idle.

        The toolbar's indicator reads ``data-status="idle"`` even before any kernel exists
        (the status bar says "No Kernel | Initializing" then), so the status bar must name
        a kernel too.  A "Select Kernel" dialog (shown if the session could not start the
        notebook's kernel by itself) is answered with the preselected kernel.
        """
        self.page.wait_for_function(
            r"""(panel) => {
                const dialog = document.querySelector('.jp-Dialog');
                if (dialog && /Select Kernel/.test(dialog.textContent)) {
                    dialog.querySelector('.jp-Dialog-button.jp-mod-accept')?.click();
                    return false;
                }
                const indicator = panel.querySelector('.jp-Notebook-ExecutionIndicator');
                const bar = document.querySelector('.jp-StatusBar-Widget')?.textContent ?? '';
                return indicator?.dataset.status === 'idle' && /\| Idle/.test(bar) && !/No Kernel/.test(bar);
            }""", arg=self.panel.element_handle(), timeout=timeout_ms, polling=100)

    def run_all_cells(self, timeout_ms: int = 120_000, done_text: str | None = None) -> None:
        """Run > Run All Cells from the menu bar, then wait until every code cell has run.

        The click is retried once if no cell starts within 15 s (a menu opened while Lab was
        still settling).  A cell that raises stops the run (later cells keep "[ ]:"), so a
        traceback in any output ends the wait at once and fails with its text.
        """
        n_code = self.panel.locator(".jp-CodeCell").count()
        assert n_code, "the notebook has no code cell"
        for attempt in range(2):
            self.tab.click()  # the notebook's own tab: makes it Lab's current widget
            self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
            self.page.locator(".lm-Menu-item:not(.lm-mod-disabled) .lm-Menu-itemLabel",
                              has_text=re.compile(r"^Run All Cells$")).click()
            try:
                self.page.wait_for_function(
                    r"""(panel) => [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
                                    .some(p => /\[(\*|\d+)\]/.test(p.textContent))""",
                    arg=self.panel.element_handle(), timeout=15_000, polling=100)
                break
            except Exception:  # noqa: BLE001 - retried once, then the wait below reports it
                if attempt:
                    raise AssertionError(f"Run All Cells started no cell; prompts {self.prompts()}") from None
        self.page.wait_for_function(
            r"""([panel, traceback]) => {
                const outputs = [...panel.querySelectorAll('.jp-OutputArea-output')];
                if (outputs.some(o => o.textContent.includes(traceback))) return true;
                const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
                return prompts.length > 0 && prompts.every(p => /\[\d+\]/.test(p.textContent));
            }""", arg=[self.panel.element_handle(), TRACEBACK], timeout=timeout_ms, polling=200)
        errors = self.errors()
        assert not errors, "a notebook cell raised:\n" + "\n\n".join(errors)
        if done_text is not None:
            self.outputs().filter(has_text=done_text).first.wait_for(timeout=timeout_ms)
        self.wait_kernel_idle(timeout_ms)


def open_notebook(page, lab, name: str, timeout_ms: int = 60_000) -> NotebookUI:
    """Open ``name`` in the Lab UI (a fresh workspace) and wait until its kernel is idle."""
    workspace = f"{re.sub(r'[^A-Za-z0-9]+', '-', name)}-{secrets.token_hex(4)}"
    page.goto(lab.notebook_url(name, workspace=workspace), timeout=timeout_ms)
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").filter(
        has=page.locator(".jp-Notebook")).first
    panel.locator(".jp-Cell").first.wait_for(state="visible", timeout=timeout_ms)
    # the panel of *this* document: its tab is the current one and carries the file name
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current", has_text=name)
    tab.wait_for(timeout=timeout_ms)
    ui = NotebookUI(page, panel, tab)
    ui.wait_kernel_idle(timeout_ms)
    return ui
