"""Reading a saved policy's files as data only: tensors, arrays and JSON, never pickled objects.

A saved policy's folder may come from elsewhere (a colleague's results, a download): its files are read
with loaders that build nothing but tensors, arrays and JSON values. ``torch.load(weights_only=True)``
unpickles tensors, containers and plain values only and refuses any other global
(https://pytorch.org/docs/stable/notes/serialization.html#weights-only); ``np.load(allow_pickle=False)``
refuses a pickle and object arrays (https://numpy.org/doc/stable/reference/generated/numpy.load.html).
A file they refuse, or whose content is not what bench writes, is a :class:`Refused`: one line that says
which file (by its suffix, which the caller turns into a path) and why.
"""

from __future__ import annotations

import io
import json
import re
from typing import Any

import numpy as np

#: Re-saving a policy: what every refusal of a saved file says is allowed.
RESAVE = "re-run the cell with save: final or best on a trusted machine"


class Refused(ValueError):
    """A saved file that bench will not read: ``suffix`` (the key of the checkpoint's ``files``) and ``why``."""

    def __init__(self, suffix: str, why: str):
        super().__init__(f"{suffix}: {why}")
        self.suffix, self.why = suffix, why


def _raw(files: dict[str, bytes], suffix: str) -> bytes:
    if suffix not in files:
        raise Refused(suffix, f"missing (the manifest names no such file, or it is gone); allowed: the files bench "
                              f"saved ({RESAVE})")
    return files[suffix]


def tensors(files: dict[str, bytes], suffix: str) -> Any:
    """The torch file ``files[suffix]``, loaded as weights only (tensors, dicts, lists, numbers, strings)."""
    import pickle
    import warnings

    import torch

    try:
        with warnings.catch_warnings():
            # A bare pickle (not torch's zip) makes torch warn about its protocol before refusing it: one line only.
            warnings.simplefilter("ignore")
            return torch.load(io.BytesIO(_raw(files, suffix)), map_location="cpu", weights_only=True)
    except Refused:
        raise
    except pickle.UnpicklingError as e:
        # torch's message runs over many lines; say only the global it refused, or the opcode it does not take.
        text = str(e)
        named = re.search(r"GLOBAL ([\w.]+)", text) or re.search(r"(Unsupported operand \d+)", text)
        what = "" if named is None else f": {'it names ' if 'GLOBAL' in named.group() else ''}{named.group(1)}"
        raise Refused(suffix, "holds a pickle of objects other than tensors, which bench does not load "
                              f"(torch.load(weights_only=True) refused it{what}); "
                              f"allowed: a file bench wrote ({RESAVE})") from None
    except Exception as e:  # noqa: BLE001 - any other failure to parse means: not a file torch.save wrote
        raise Refused(suffix, f"not a torch file bench wrote (damaged or changed since: {type(e).__name__}); "
                              f"allowed: a file bench wrote ({RESAVE})") from None


def arrays(files: dict[str, bytes], suffix: str) -> dict[str, np.ndarray]:
    """The ``.npz`` ``files[suffix]`` as arrays, every one read now (a pickle or an object array is refused)."""
    try:
        with np.load(io.BytesIO(_raw(files, suffix)), allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except Refused:
        raise
    except ValueError as e:
        # NumPy's words for a pickle ("Cannot load file containing pickled data ...") or an object array.
        if "pickle" in str(e):
            raise Refused(suffix, "holds pickled Python objects, which bench does not load (np.load(allow_pickle=False) "
                                  f"refused it); allowed: arrays as bench writes them ({RESAVE})") from None
        raise Refused(suffix, f"not an .npz file bench wrote (damaged or changed since); allowed: {RESAVE}") from None
    except Exception:  # noqa: BLE001 - a bad zip, a truncated array: not a file bench wrote
        raise Refused(suffix, f"not an .npz file bench wrote (damaged or changed since); allowed: {RESAVE}") from None


def json_of(files: dict[str, bytes], suffix: str) -> dict[str, Any]:
    """The JSON object ``files[suffix]``."""
    try:
        value = json.loads(_raw(files, suffix).decode())
    except Refused:
        raise
    except (UnicodeDecodeError, ValueError):
        raise Refused(suffix, f"not JSON (damaged or changed since); allowed: a file bench wrote ({RESAVE})") from None
    if not isinstance(value, dict):
        raise Refused(suffix, f"not a JSON object; allowed: a file bench wrote ({RESAVE})")
    return value


def field(data: Any, key: str, types: tuple[type, ...], suffix: str) -> Any:
    """``data[key]`` when it is one of ``types`` (a bool is not an int here); else the file is not bench's format."""
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        raise Refused(suffix, f"not bench's format ({key!r} missing or of the wrong type); allowed: a file bench "
                              f"wrote ({RESAVE})")
    return value
