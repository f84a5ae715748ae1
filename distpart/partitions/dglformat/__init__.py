"""DGL's binary file formats, read and written with plain numpy.

This folder owns the byte layout of the three kinds of file a DGL partition is made of
(shared/spec/dgl-partition-format.md, "Binary layout"):

* NDArray records (`records`: `write_array` / `read_array`; `Pieces`, an array written
  piece by piece),
* tensor dicts, as `dgl.data.save_tensors` writes them (`tensors`: `TensorDictWriter`,
  `write_tensor_dict`, `read_tensor_dict`),
* graph files holding one homogeneous graph, as `dgl.save_graphs` writes them
  (`graphs`: `write_graph`, `read_graph`),

and the dtype rules (`to_storable`) that keep every array we write loadable by DGL 2.x
running on torch 2.2. It knows nothing about partitions, MPI or torch. All files are
little-endian whatever the host.
"""
from .graphs import GRAPH_FORMATS, PartitionGraph, graph_formats, read_graph, write_graph
from .records import Pieces, read_array, release_pages, storable_dtype, to_storable, write_array
from .tensors import TensorDictWriter, read_tensor_dict, write_tensor_dict

__all__ = ["GRAPH_FORMATS", "PartitionGraph", "Pieces", "TensorDictWriter", "graph_formats", "read_array", "read_graph",
           "read_tensor_dict", "release_pages", "storable_dtype", "to_storable", "write_array", "write_graph", "write_tensor_dict"]
