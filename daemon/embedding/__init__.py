"""Sentence embeddings: the model catalogue (`catalogue`: which models, their files and
checksums, preparing MPNet), the loader and runner (`embedder`: `get_embedder`, `Embedder`,
`EmbeddingInfo`), the torch-free ONNX export (`onnx_export`) and the bundled tokenizer files
of the default model (`model_files/`).

Below the Grimoire: the store keeps vectors and asks an `Embedder` for them; nothing here
knows entries, SQLite or LanceDB.
"""
