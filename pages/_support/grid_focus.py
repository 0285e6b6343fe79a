"""Keep every key typed into a grid cell's editor (``st.data_editor``): focus given back, keys typed early kept.

Three quirks of Streamlit's grid (glide-data-grid) lose what a person types right after opening a cell.

1. A double-click after an edit sometimes opens an editor without the keyboard.  The grid opens a cell's
   editor on a *second click* on the selected cell.  Once any cell is selected, which is always the case after
   an edit, the two clicks of a double-click on another cell are a select and a second click: the editor opens
   on the second button release.  But the grid's press handler has already asked, deferred to the next
   animation frame, to focus the grid itself; that frame comes after the editor opened and takes its focus.
2. Keys typed before the editor is there are dropped after the first.  When the double-click opened no editor
   yet (the page is busy: a rerun of the last edit is being drawn, or the server is loaded), the first key
   typed on the selected cell makes the grid open an editor holding that key; the keys typed until that editor
   is drawn go to the grid (or its accessibility table), which ignores them.  "0.5" became "05".
3. A redraw of the page (the rerun of the last edit, arriving while the next cell is typed) selects the whole
   text of the open editor, so the next key replaces it (streamlit issue 7831): "7.5" became ".5".

The fix: a small script in the page.  (1) When the grid takes the focus from an editor within
:data:`WINDOW_MS` of the editor's opening and before any key was pressed there, the focus goes back to it.
(2) A key pressed on the grid while an editor is open goes into that editor; a key pressed after the key that
started an edit and before its editor is drawn (at most :data:`PENDING_MS`, until the next click) is held back
and typed into the editor once it is drawn, in order, Enter, Tab and Escape included (they close the editor as
they would have).
(3) A key typed into an editor whose whole text is selected after the person already typed there goes after
that text.  Enter, Tab and Escape pressed in an editor close it as before; a click elsewhere closes it as before.
It is a constant string, installed once per browser tab.
"""

from __future__ import annotations

import streamlit as st

#: The focus taken from a just-opened editor within this many milliseconds is given back (one animation frame is
#: about 17 ms; the grid's own focus comes one frame after the click that opened the editor).
WINDOW_MS = 250
#: Keys typed after the key that started an edit are held for its editor this long at most (a loaded page draws
#: the editor within a second or two; keys held longer are dropped, as the grid would have dropped them).
PENDING_MS = 3000

SCRIPT = """<script>
(() => {
  if (window.__privsynGridFocus) return;
  window.__privsynGridFocus = true;
  let opened = -1, keyed = false, started = -1, held = [];
  const CLOSING = ["Enter", "Tab", "Escape"];
  const inGrid = (node) => node && node.closest && node.closest("[data-testid='stDataFrame']");
  const isEditor = (node) => node && node.classList && node.classList.contains("gdg-input");
  const setValue = (editor, text) => {  // as typing does: through the element's own setter, then an input event
    const value = editor.value;
    let from = value.length, to = value.length;
    try { from = editor.selectionStart ?? from; to = editor.selectionEnd ?? to; } catch (e) {}
    Object.getOwnPropertyDescriptor(Object.getPrototypeOf(editor), "value").set.call(
      editor, value.slice(0, from) + text + value.slice(to));
    try { editor.setSelectionRange(from + text.length, from + text.length); } catch (e) {}
    editor.dispatchEvent(new Event("input", {bubbles: true}));
  };
  const press = (editor, key) => {
    editor.dispatchEvent(new KeyboardEvent("keydown", {key: key, code: key, bubbles: true, cancelable: true}));
  };
  const type = (editor, key) => CLOSING.includes(key) ? press(editor, key) : setValue(editor, key);
  const typeAll = (editor, keys) => {  // the characters at once, before any later key; a closing key a task later
    const stop = keys.findIndex((key) => CLOSING.includes(key));
    const text = (stop < 0 ? keys : keys.slice(0, stop)).join("");
    if (text) setValue(editor, text);
    if (stop >= 0) setTimeout(() => press(editor, keys[stop]), 50);
  };
  document.addEventListener("keydown", (event) => {
    const target = event.target;
    if (isEditor(target)) {
      // a redraw of the page selects the whole text of an open editor (streamlit issue 7831): a key typed next
      // would replace what was typed before it, so the selection goes back to the end of the text
      const text = target.value || "";
      const all = text && target.selectionStart === 0 && target.selectionEnd === text.length;
      if (keyed && event.key.length === 1 && all) {
        try { target.setSelectionRange(text.length, text.length); } catch (e) {}
      }
      keyed = true;
      return;
    }
    if (!inGrid(target) || event.ctrlKey || event.metaKey || event.altKey) return;
    const printable = event.key.length === 1, closing = CLOSING.includes(event.key);
    if (!printable && !closing) return;
    const editor = document.querySelector(".gdg-input");
    if (editor) {  // the grid has the keyboard while an editor is open: the key is the editor's
      event.preventDefault();
      event.stopImmediatePropagation();
      keyed = true;
      editor.focus({preventScroll: true});
      type(editor, event.key);
      return;
    }
    if (started >= 0 && performance.now() - started < PENDING_MS) {  // an edit started, its editor not drawn yet
      event.preventDefault();
      event.stopImmediatePropagation();
      held.push(event.key);
      return;
    }
    started = printable ? performance.now() : -1;  // this key makes the grid open an editor holding it
    held = [];
  }, true);
  document.addEventListener("pointerdown", () => { started = -1; held = []; }, true);  // a click: a new start
  document.addEventListener("focusin", (event) => {
    const target = event.target;
    if (isEditor(target)) {
      opened = performance.now();
      keyed = held.length > 0;
      const keys = held;
      started = -1;
      held = [];
      typeAll(target, keys);
      return;
    }
    const editor = document.querySelector(".gdg-input");
    if (editor && !keyed && performance.now() - opened < WINDOW_MS && inGrid(target)) {
      editor.focus({preventScroll: true});
    }
  }, true);
})();
</script>""".replace("WINDOW_MS", str(WINDOW_MS)).replace("PENDING_MS", str(PENDING_MS))


def install() -> None:
    """Put the script in the page (a constant: no user input reaches it)."""
    st.html(SCRIPT, unsafe_allow_javascript=True, width="content")
