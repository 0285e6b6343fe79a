"""Keep the keyboard in a grid cell's editor that a double-click has just opened (``st.data_editor``).

The quirk: a double-click after an edit sometimes opens no editor.  Streamlit's grid
(glide-data-grid) opens a cell's editor on a *second click* on the selected cell.  Once any cell is
selected, which is always the case after an edit, the two clicks of a double-click on another cell
are a select and a second click: the editor opens on the second button release.  But the grid's
press handler has already asked, deferred to the next animation frame, to focus the grid itself;
that frame comes after the editor opened and takes its focus.  The editor stays drawn, empty and
without the keyboard: what the user types goes to the grid, which starts a new edit from some keys
and drops others (a typed ``0`` became an empty cell in ``tests/browser/test_schema_grid.py``).

The fix: a small script in the page that gives the focus back to the open editor when the grid takes
it within :data:`WINDOW_MS` of the editor's opening and before any key was pressed there (Enter,
Tab and Escape close an editor by a key, so they are never undone; a click elsewhere closes it as
before).  It is a constant string, installed once per browser tab.
"""

from __future__ import annotations

import streamlit as st

#: The focus taken from a just-opened editor within this many milliseconds is given back (one animation frame is
#: about 17 ms; the grid's own focus comes one frame after the click that opened the editor).
WINDOW_MS = 250

SCRIPT = """<script>
(() => {
  if (window.__privsynGridFocus) return;
  window.__privsynGridFocus = true;
  let opened = -1, keyed = false;
  document.addEventListener("keydown", () => { keyed = true; }, true);
  document.addEventListener("focusin", (event) => {
    const target = event.target;
    if (target.classList && target.classList.contains("gdg-input")) {
      opened = performance.now();
      keyed = false;
      return;
    }
    const editor = document.querySelector(".gdg-input");
    if (editor && !keyed && performance.now() - opened < WINDOW_MS && target.closest
        && target.closest("[data-testid='stDataFrame']")) {
      editor.focus({preventScroll: true});
    }
  }, true);
})();
</script>""".replace("WINDOW_MS", str(WINDOW_MS))


def install() -> None:
    """Put the script in the page (a constant: no user input reaches it)."""
    st.html(SCRIPT, unsafe_allow_javascript=True, width="content")
