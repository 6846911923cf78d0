"""Sentence embeddings: the model catalogue (`catalogue`: which models, their files and
checksums, preparing MPNet), the loader and runner (`embedder`: `get_embedder`, `Embedder`,
`EmbeddingInfo`), the embedding process the daemon runs them in (`host`: its main; `remote`:
the daemon's side, `ModelHost`, `RemoteEmbedder`; `frames`: their wire), the torch-free ONNX
export (`onnx_export`) and the bundled tokenizer files of the default model (`model_files/`).

Below the Grimoire: the store keeps vectors and asks an `Embedder` for them; nothing here
knows entries, SQLite or LanceDB.
"""
