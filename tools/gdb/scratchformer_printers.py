# gdb pretty-printers and commands for Scratchformer tensors and autograd nodes.
#
#   (gdb) p q
#   $3 = Tensor shape=(2, 4, 5, 4) dtype=float32 strides=(80, 4, 16, 1) requires_grad=true
#   grad_fn=<Permute> values=[1.0492, -0.8188, 0.6447, -0.3401, 0.2741, 0.1456, -0.6207, -0.4120,
#   -0.3224, -0.1103, ...]                                  (one line; docs/debugging.md)
#
# What is printed, and where it comes from (autograd/tensor.h, autograd/node.h):
#   shape, strides, offset   TensorImpl::shape, ::strides, ::offset (offset only when not 0)
#   dtype                    TensorImpl::dtype, the sf::Dtype enumerator in lower case
#   requires_grad, grad_fn   the autograd fields; grad_fn is the op that made the tensor
#   name                     the label set by set_name / register_parameter, when there is one
#   values                   the first MAX_VALUES elements in row-major order, read from
#                            storage->data at offset + sum(index[d] * strides[d])
#
# Commands (see `help sf-print`, `help sf-graph`):
#   sf-print [-n MAX] EXPR    every value of a tensor, one row of the last dimension per line
#   sf-graph [-d DEPTH] EXPR  the autograd graph below a tensor or a node, one op per line
#   sf-grad [-n MAX] EXPR     a tensor's accumulated gradient, as sf-print prints it, read from
#                             TensorImpl::grad: no call into the program, unlike `p t.grad()`
#                             (which fails on VMs where gdb cannot call functions:
#                             "Couldn't write extended state status")
#
# Loading: programs that link autograd name this file in their .debug_gdb_scripts section
# (autograd/runtime/gdb_autoload.cpp), so gdb loads it by itself once the repository is a safe path:
#     echo "add-auto-load-safe-path /path/to/scratchformer" >> ~/.gdbinit
# By hand: (gdb) source /path/to/scratchformer/tools/gdb/scratchformer_printers.py
#
# The printers only read memory; they never call functions in the program. So they work at any
# breakpoint and in a core file, and a tensor that is not constructed yet (a local before its
# line has run) prints as "<not constructed yet?>" instead of garbage.
# Written against libstdc++'s layout of shared_ptr, vector and string (libc++ is handled too).

import re
import struct

import gdb
import gdb.printing

MAX_VALUES = 10        # values shown by `p t`
MAX_NDIM = 16          # more dimensions than this means the memory is not a tensor (yet)
SF_PRINT_MAX = 1000    # values shown by `sf-print` unless -n says otherwise (as torch's threshold)
SF_GRAPH_DEPTH = 12    # levels shown by `sf-graph` unless -d says otherwise
SF_GRAPH_NODES = 300   # nodes shown by `sf-graph` at most

# sf::Dtype -> (element size in bytes, struct format character)
_DTYPES = {
    "float32": (4, "f"),
    "float64": (8, "d"),
    "int64": (8, "q"),
    "bool": (1, "?"),
}


class NotATensor(Exception):
    """The memory does not hold a valid tensor (a local before construction, freed memory)."""


# ---- reading libstdc++ / libc++ objects without calling into the program --------------------

def _member(value, *names):
    """The first of `names` that is a member of `value` (libstdc++ and libc++ spell them apart)."""
    for name in names:
        try:
            return value[name]
        except gdb.error:
            continue
    raise gdb.error("no member %s in %s" % (" or ".join(names), value.type))


def _shared_ptr_get(sp):
    """std::shared_ptr<T> or std::weak_ptr<T> -> T* (may be 0)."""
    return _member(sp, "_M_ptr", "__ptr_")


def _vector_items(vec, limit, what):
    """std::vector<T> -> list of T values; NotATensor if its size is negative or above limit."""
    try:
        begin = vec["_M_impl"]["_M_start"]
        end = vec["_M_impl"]["_M_finish"]
    except gdb.error:
        begin, end = vec["__begin_"], vec["__end_"]
    n = int(end - begin)
    if n < 0 or n > limit:
        raise NotATensor("%s has %d entries" % (what, n))
    return [(begin + i).dereference() for i in range(n)]


def _printable(text):
    """`text` as gdb can show it: unchanged when the terminal's charset (gdb's host charset, from
    LANG) holds every character, as in a UTF-8 locale; otherwise, under the C locale, with
    \\uXXXX escapes for what it cannot hold ("\\u6ce8\\u610f" for a Chinese name)."""
    try:
        charset = gdb.host_charset()
        text.encode(charset)
        return text
    except (AttributeError, LookupError):  # a gdb before 12, or a charset Python does not know
        return text.encode("ascii", "backslashreplace").decode("ascii")
    except UnicodeEncodeError:
        return text.encode(charset, "backslashreplace").decode(charset)


def _std_string(s):
    """std::string -> Python str, "?" if unreadable (libstdc++ layout; for libc++'s, gdb's own
    printing of the string). The bytes are read as UTF-8, the project's text, whatever gdb's
    charset (a byte that is not UTF-8 becomes U+FFFD), then made printable (_printable)."""
    try:
        try:
            n = int(s["_M_string_length"])
        except gdb.error:
            return str(s).strip('"')
        if n < 0 or n > 4096:
            return "?"
        return _printable(s["_M_dataplus"]["_M_p"].string(encoding="utf-8", errors="replace", length=n)) if n else ""
    except (gdb.error, UnicodeDecodeError):  # gdb.MemoryError is a gdb.error
        return "?"


def _deref_type(value):
    """Strips references and typedefs: the type a printer should match."""
    t = value.type
    if t.code in (gdb.TYPE_CODE_REF, gdb.TYPE_CODE_RVALUE_REF):
        t = t.target()
    return t.strip_typedefs().unqualified()


# ---- tensors ---------------------------------------------------------------------------------

def _dtype_name(dtype_value):
    """sf::Dtype value -> "float32", ... (the enumerator's name in lower case)."""
    text = str(dtype_value)               # "sf::Dtype::Float32"
    return text.rsplit("::", 1)[-1].lower()


class TensorView:
    """The fields of one sf::TensorImpl, read and checked."""

    def __init__(self, impl):
        self.shape = [int(x) for x in _vector_items(impl["shape"], MAX_NDIM, "shape")]
        self.strides = [int(x) for x in _vector_items(impl["strides"], MAX_NDIM, "strides")]
        if len(self.strides) != len(self.shape) or any(s < 0 for s in self.shape):
            raise NotATensor("shape %s with strides %s" % (self.shape, self.strides))
        self.offset = int(impl["offset"])
        self.dtype = _dtype_name(impl["dtype"])
        self.requires_grad = bool(impl["requires_grad"])
        self.has_grad = int(_shared_ptr_get(impl["grad"])) != 0
        grad_fn = _shared_ptr_get(impl["grad_fn"])
        self.grad_fn = node_name(grad_fn.dereference()) if int(grad_fn) else None
        self.name = _std_string(impl["name"])
        storage = _shared_ptr_get(impl["storage"])
        self.data = int(storage.dereference()["data"]) if int(storage) else 0
        self.nbytes = int(storage.dereference()["nbytes"]) if int(storage) else 0

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def header(self):
        """Everything but the values: "shape=(2, 3) dtype=float32 strides=(3, 1) ..."."""
        parts = ["shape=" + _tuple_str(self.shape), "dtype=" + self.dtype,
                 "strides=" + _tuple_str(self.strides)]
        if self.offset:
            parts.append("offset=%d" % self.offset)
        parts.append("requires_grad=" + ("true" if self.requires_grad else "false"))
        if self.grad_fn:
            parts.append("grad_fn=<%s>" % self.grad_fn)
        if self.has_grad:
            parts.append("grad=set")
        if self.name:
            parts.append('name="%s"' % self.name)
        return " ".join(parts)

    def values(self, count):
        """The first `count` elements in row-major order, as Python numbers."""
        if self.dtype not in _DTYPES:
            raise NotATensor("dtype " + self.dtype)
        size, fmt = _DTYPES[self.dtype]
        offsets = list(_row_major_offsets(self.shape, self.strides, self.offset, count))
        if not offsets:
            return []
        lo, hi = min(offsets), max(offsets)
        if lo < 0 or (hi + 1) * size > self.nbytes or not self.data:
            raise NotATensor("elements %d..%d outside a storage of %d bytes"
                             % (lo, hi, self.nbytes))
        # One read of the span that holds them (a view may skip elements in between).
        block = gdb.selected_inferior().read_memory(self.data + lo * size, (hi - lo + 1) * size)
        raw = bytes(block)
        return [struct.unpack_from("=" + fmt, raw, (o - lo) * size)[0] for o in offsets]


def _tuple_str(xs):
    """[2, 3] -> "(2, 3)", as shape_str in tensor.cpp; [5] -> "(5)"; [] -> "()"."""
    return "(" + ", ".join(str(x) for x in xs) + ")"


def _row_major_offsets(shape, strides, offset, count):
    """Storage offsets (in elements) of the first `count` elements in row-major order."""
    numel = 1
    for s in shape:
        numel *= s
    index = [0] * len(shape)
    for _ in range(min(count, numel)):
        yield offset + sum(i * st for i, st in zip(index, strides))
        for d in reversed(range(len(shape))):  # odometer: bump the last dim, carry leftwards
            index[d] += 1
            if index[d] < shape[d]:
                break
            index[d] = 0


def format_value(v, dtype):
    """One element as print.cpp writes it: 4 decimals, scientific for very large or small."""
    if dtype == "bool":
        return "True" if v else "False"
    if dtype == "int64":
        return "%d" % v
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    if v != 0 and (abs(v) >= 1e8 or abs(v) < 1e-4):
        return "%.4e" % v
    return "%.4f" % v


def _impl_of(value):
    """sf::Tensor, sf::TensorImpl, a pointer to either or shared_ptr<TensorImpl> -> TensorImpl
    value, or None for an undefined tensor."""
    t = _deref_type(value)
    if t.code == gdb.TYPE_CODE_PTR:
        if int(value) == 0:
            return None
        value = value.dereference()
        t = _deref_type(value)
    name = t.tag or t.name or ""
    if name == "sf::TensorImpl":
        return value
    if name == "sf::Tensor":
        value = value["impl_"]
    ptr = _shared_ptr_get(value)
    return ptr.dereference() if int(ptr) else None


def tensor_summary(impl):
    """One line: the header and the first MAX_VALUES values."""
    try:
        view = TensorView(impl)
        values = view.values(MAX_VALUES)
        shown = ", ".join(format_value(v, view.dtype) for v in values)
        more = ", ..." if view.numel() > len(values) else ""
        return "%s values=[%s%s]" % (view.header(), shown, more)
    except NotATensor as e:
        return "<not constructed yet? %s>" % e
    except gdb.error as e:  # gdb.MemoryError is one: a pointer into nowhere
        return "<not constructed yet? %s>" % _memory_error_text(e)


def _memory_error_text(error):
    """gdb's "Cannot access memory at address 0x20" -> "cannot read 0x20"; others unchanged."""
    return re.sub(r"^Cannot access memory at address", "cannot read", str(error))


class TensorPrinter:
    """sf::Tensor: a handle (one shared_ptr) to a TensorImpl."""

    def __init__(self, value):
        self.value = value

    def to_string(self):
        try:
            impl = _impl_of(self.value)
        except gdb.error as e:
            return "Tensor <not constructed yet? %s>" % _memory_error_text(e)
        if impl is None:
            return "Tensor (undefined)"
        return "Tensor " + tensor_summary(impl)


class TensorImplPrinter:
    """sf::TensorImpl: shape, strides, dtype, storage and the autograd fields."""

    def __init__(self, value):
        self.value = value

    def to_string(self):
        return "TensorImpl " + tensor_summary(self.value)


# ---- autograd nodes --------------------------------------------------------------------------

def node_name(node):
    """An sf::Node (any subclass) -> the op name its name() returns, read without calling it.

    name() is virtual, so the name comes from the node's dynamic type (found from its vtable):
    "sf::MatMul" -> "MatMul". Ops that serve several names keep them in an `op_name` field
    (View: "Reshape", "Unsqueeze", ...; Copy: "Contiguous", ...), which is read instead."""
    obj, dynamic = _as_dynamic(node)
    try:
        return obj["op_name"].string()
    except (gdb.error, UnicodeDecodeError):  # no such field, or unreadable
        pass
    type_name = dynamic.tag or dynamic.name or "Node"  # "Node": no vtable information
    return re.sub(r"<.*>$", "", type_name).rsplit("::", 1)[-1]


def _as_dynamic(node):
    """An sf::Node value -> (the same object as its dynamic type, that type)."""
    try:
        dynamic = node.dynamic_type.strip_typedefs()
        if dynamic != node.type.strip_typedefs():
            return node.cast(dynamic), dynamic
    except gdb.error:
        pass
    return node, node.type.strip_typedefs()


def node_summary(node):
    """"<MatMul> -> (2, 4, 5, 5) float32, inputs: <Permute>, <Permute>" for one node."""
    name = node_name(node)
    parts = ["<%s>" % name]
    try:
        if name == "AccumulateGrad":
            leaf = _shared_ptr_get(_as_dynamic(node)[0]["leaf"])
            if int(leaf):
                view = TensorView(leaf.dereference())
                label = ' "%s"' % view.name if view.name else ""
                parts.append("into leaf%s %s" % (label, _tuple_str(view.shape)))
            return " ".join(parts)
        shape = [int(x) for x in _vector_items(node["output_shape"], MAX_NDIM, "output_shape")]
        parts.append("-> %s %s," % (_tuple_str(shape), _dtype_name(node["output_dtype"])))
        inputs = []
        for sp in _vector_items(node["inputs"], 64, "inputs"):
            ptr = _shared_ptr_get(sp)
            inputs.append("<%s>" % node_name(ptr.dereference()) if int(ptr) else "none")
        parts.append("inputs: " + (", ".join(inputs) if inputs else "none"))
        if bool(node["released"]):
            parts.append("(saved tensors released)")
    except NotATensor as e:
        return "<not constructed yet? %s>" % e
    except gdb.error as e:
        return "<not constructed yet? %s>" % _memory_error_text(e)
    return " ".join(parts)


class NodePrinter:
    """sf::Node, also as the base part of a subclass: `p *this` inside MatMul::backward shows
    {<sf::Node> = <MatMul> -> ..., a = Tensor ..., b = Tensor ...}."""

    def __init__(self, value):
        self.value = value

    def to_string(self):
        return node_summary(self.value)


class NodePtrPrinter:
    """std::shared_ptr<sf::Node>, e.g. a TensorImpl's grad_fn or a node's inputs."""

    def __init__(self, value):
        self.value = value

    def to_string(self):
        ptr = _shared_ptr_get(self.value)
        if int(ptr) == 0:
            return "null (no node)"
        return "0x%x %s" % (int(ptr), node_summary(ptr.dereference()))


# ---- registration ----------------------------------------------------------------------------

class _Subprinter:
    def __init__(self, name, matches, printer):
        self.name, self.matches, self.printer, self.enabled = name, matches, printer, True


class ScratchformerPrinters(gdb.printing.PrettyPrinter):
    """`info pretty-printer` lists these under the program's path (or `global` when sourced by
    hand); `disable pretty-printer .*scratchformer scratchformer;^Tensor$` turns one off."""

    _SHARED_NODE = re.compile(r"^std::(__\d+::)?shared_ptr<sf::Node>$")

    def __init__(self):
        super().__init__("scratchformer", [])
        self.subprinters = [
            _Subprinter("Tensor", lambda n: n == "sf::Tensor", TensorPrinter),
            _Subprinter("TensorImpl", lambda n: n == "sf::TensorImpl", TensorImplPrinter),
            _Subprinter("Node", lambda n: n == "sf::Node", NodePrinter),
            _Subprinter("shared_ptr<Node>", lambda n: bool(self._SHARED_NODE.match(n)),
                        NodePtrPrinter),
        ]

    def __call__(self, value):
        t = _deref_type(value)
        name = t.tag or t.name
        if not name:
            return None
        for sub in self.subprinters:
            if sub.enabled and sub.matches(name):
                return sub.printer(value)
        return None


# ---- commands --------------------------------------------------------------------------------

def _parse_args(arg, flag, default, usage):
    """"-n 50 expr" -> (50, "expr"); "expr" -> (default, "expr")."""
    words = arg.strip().split(None, 2)
    if len(words) >= 3 and words[0] == flag:
        try:
            return int(words[1]), words[2]
        except ValueError:
            pass
    if not arg.strip() or arg.strip() == flag or arg.strip().startswith(flag + " "):
        raise gdb.GdbError("usage: " + usage)
    return default, arg.strip()


class SfPrint(gdb.Command):
    """Print every value of a tensor, one row of its last dimension per line.

Usage: sf-print [-n MAX] EXPR
EXPR is an sf::Tensor, an sf::TensorImpl or a pointer to one. At most MAX values are shown
(default 1000). A 2-d block is printed for each index of the leading dimensions:

  (gdb) sf-print -n 10 weights
  shape=(2, 4, 5, 5) dtype=float32 strides=(100, 25, 5, 1) requires_grad=true grad_fn=<Softmax>
  [0, 0, :, :] =
    [1.0000, 0.0000, 0.0000, 0.0000, 0.0000]
    [0.5474, 0.4526, 0.0000, 0.0000, 0.0000]
  ... 190 more values (sf-print -n 200 weights shows them all)

MAX is rounded up to whole rows. `$` (the last value printed, e.g. by `finish`) works too."""

    def __init__(self):
        super().__init__("sf-print", gdb.COMMAND_DATA, gdb.COMPLETE_EXPRESSION)

    def invoke(self, arg, from_tty):
        limit, expr = _parse_args(arg, "-n", SF_PRINT_MAX, "sf-print [-n MAX] EXPR")
        impl = _impl_of(gdb.parse_and_eval(expr))
        if impl is None:
            gdb.write("%s: undefined tensor\n" % expr)
            return
        _write_values(impl, expr, limit, "sf-print")


def _write_values(impl, expr, limit, command):
    """sf-print's output for the TensorImpl `impl`: the header, then up to `limit` values (whole
    rows of the last dimension) under [i, j, :, :] headers. `command` names the command in the hint."""
    try:
        view = TensorView(impl)
        row = view.shape[-1] if view.shape and view.shape[-1] > 0 else 1
        values = view.values(-(-limit // row) * row)  # whole rows: round up to a multiple
    except NotATensor as e:
        raise gdb.GdbError("%s: not constructed yet? %s" % (expr, e))
    gdb.write(view.header() + "\n")
    gdb.write(_rows_text(view.shape, [format_value(v, view.dtype) for v in values]))
    if view.numel() > len(values):
        gdb.write("... %d more values (%s -n %d %s shows them all)\n"
                  % (view.numel() - len(values), command, view.numel(), expr))


class SfGrad(gdb.Command):
    """Print a tensor's accumulated gradient (what t.grad() returns) without calling the program.

Usage: sf-grad [-n MAX] EXPR
EXPR is an sf::Tensor, an sf::TensorImpl or a pointer to one. The gradient is read from the
TensorImpl's `grad` field, so this works where `p t.grad()` cannot run (a core file, or a VM
on which gdb says "Couldn't write extended state status" for any call), and prints like sf-print:

  (gdb) sf-grad -n 8 attn.q_proj->weight
  grad of attn.q_proj->weight: shape=(16, 16) dtype=float32 strides=(16, 1) requires_grad=false
  [-0.4672, -1.7831, -2.0661, -0.0651, -0.8996, -2.8687, -0.7667, -3.1208, ...]

The same by hand: p *t.impl_._M_ptr->grad._M_ptr (one line), or the raw floats with
x/8f (float*)t.impl_._M_ptr->grad._M_ptr->storage._M_ptr->data"""

    def __init__(self):
        super().__init__("sf-grad", gdb.COMMAND_DATA, gdb.COMPLETE_EXPRESSION)

    def invoke(self, arg, from_tty):
        limit, expr = _parse_args(arg, "-n", SF_PRINT_MAX, "sf-grad [-n MAX] EXPR")
        impl = _impl_of(gdb.parse_and_eval(expr))
        if impl is None:
            gdb.write("%s: undefined tensor\n" % expr)
            return
        grad = _shared_ptr_get(impl["grad"])
        if not int(grad):
            gdb.write("%s: no gradient yet (backward has not reached it, or it needs none)\n" % expr)
            return
        gdb.write("grad of %s: " % expr)
        _write_values(grad.dereference(), expr, limit, "sf-grad")


def _rows_text(shape, texts):
    """The formatted values laid out as rows of the last dim, under [i, j, :, :] headers."""
    if not shape:
        return (texts[0] if texts else "") + "\n"
    width = max((len(t) for t in texts), default=1)
    row_len = shape[-1] if shape[-1] > 0 else 1
    rows_per_block = shape[-2] if len(shape) >= 2 and shape[-2] > 0 else 1
    lead = shape[:-2]
    out = []
    for r in range(0, len(texts), row_len):
        row_index = r // row_len
        if lead and row_index % rows_per_block == 0:
            block, index = row_index // rows_per_block, []
            for size in reversed(lead):  # block number -> index over the leading dims
                index.insert(0, block % size)
                block //= size
            out.append("[%s, :, :] =" % ", ".join(str(i) for i in index))
        indent = "  " if lead else ""
        row = ", ".join(t.rjust(width) for t in texts[r:r + row_len])
        out.append("%s[%s]" % (indent, row))
    return "\n".join(out) + "\n"


class SfGraph(gdb.Command):
    """Print the autograd graph below a tensor (or a node), one op per line.

Usage: sf-graph [-d DEPTH] EXPR
EXPR is an sf::Tensor, an sf::TensorImpl, an sf::Node, or a pointer or shared_ptr to one.
Each line is a node: its op name, output shape and dtype; indented lines are its inputs, in
order. AccumulateGrad nodes end a path at a leaf (a parameter or an input). A node reached
twice is printed once and then referred to as "(above)". DEPTH limits the levels (default 12)."""

    def __init__(self):
        super().__init__("sf-graph", gdb.COMMAND_DATA, gdb.COMPLETE_EXPRESSION)

    def invoke(self, arg, from_tty):
        depth_limit, expr = _parse_args(arg, "-d", SF_GRAPH_DEPTH, "sf-graph [-d DEPTH] EXPR")
        root = _node_of(gdb.parse_and_eval(expr))
        if root is None:
            gdb.write("%s: no grad_fn (a leaf, or made with grad mode off)\n" % expr)
            return
        # Iterative depth-first walk (a deep graph must not overflow Python's stack).
        seen = set()
        stack = [(root, 0)]
        shown = 0
        while stack and shown < SF_GRAPH_NODES:
            node, depth = stack.pop()
            address = int(node.address)
            if address in seen:
                gdb.write("  " * depth + "<%s> (above)\n" % node_name(node))
                continue
            seen.add(address)
            shown += 1
            gdb.write("  " * depth + node_summary(node) + "\n")
            if depth + 1 > depth_limit:
                continue
            try:
                inputs = _vector_items(node["inputs"], 64, "inputs")
            except NotATensor:
                continue
            for sp in reversed(inputs):  # pushed in reverse so that input 0 prints first
                ptr = _shared_ptr_get(sp)
                if int(ptr):
                    stack.append((ptr.dereference(), depth + 1))
        if stack:
            gdb.write("... (stopped after %d nodes)\n" % shown)


def _node_of(value):
    """A tensor's grad_fn, or the node a value (Node, Node*, shared_ptr<Node>) refers to."""
    t = _deref_type(value)
    if t.code == gdb.TYPE_CODE_PTR:
        target = t.target().strip_typedefs()
        if (target.tag or "") in ("sf::Tensor", "sf::TensorImpl"):
            return _node_of(value.dereference())
        return value.dereference() if int(value) else None
    name = t.tag or t.name or ""
    if name in ("sf::Tensor", "sf::TensorImpl"):
        impl = _impl_of(value)
        if impl is None:
            return None
        ptr = _shared_ptr_get(impl["grad_fn"])
        return ptr.dereference() if int(ptr) else None
    if ScratchformerPrinters._SHARED_NODE.match(name):
        ptr = _shared_ptr_get(value)
        return ptr.dereference() if int(ptr) else None
    return value  # a node (or subclass) itself


def register(objfile=None):
    """Registers the printers with `objfile` (the program, when auto-loaded) or globally."""
    gdb.printing.register_pretty_printer(objfile, ScratchformerPrinters(), replace=True)


def _on_new_objfile(event):
    """Sourced by hand: attach the printers to each program gdb loads (see below)."""
    if event.new_objfile.filename == gdb.current_progspace().filename:
        register(event.new_objfile)


if gdb.current_objfile() is not None:  # auto-loaded for this program
    register(gdb.current_objfile())
else:
    # Sourced by hand (~/.gdbinit, VS Code's setupCommands). gdb asks the printers of every
    # objfile before the global ones, so registered only globally, libstdc++'s printer would
    # show a shared_ptr<sf::Node> before ours could. Attach them to the program too: the one
    # loaded now, and any loaded later.
    register(None)
    for _objfile in gdb.objfiles():
        if _objfile.filename == gdb.current_progspace().filename:
            register(_objfile)
    gdb.events.new_objfile.connect(_on_new_objfile)
SfPrint()
SfGraph()
SfGrad()
