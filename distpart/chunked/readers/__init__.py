"""Reading chunk files: edge lists (CSV, NumPy, Parquet) and features (NumPy, Parquet, CSV, HDF5).

The unit of reading is a *piece* (`pieces`): a slice of one chunk file, rows for NumPy,
Parquet and HDF5, bytes for CSV. Edge pieces are read by `edges`; a feature is read
through a `FeatureSource` (`features`), one row-addressable array over its files, decoded
a unit at a time (a Parquet row group or record batch, `parquet`; a window of CSV lines,
`csv`). Files are opened through `opening`, so every missing or unreadable file is an
InputError naming it. Nothing here talks to MPI.
"""
from .csv import CsvLayout, csv_feature_layout, read_csv_ints
from .edges import edge_file_sizes, read_edge_piece
from .features import FeatureSource
from .parquet import ParquetLayout, parquet_data_columns
from .pieces import Piece, block_bounds, pieces_of_block, split_pieces

__all__ = ["CsvLayout", "FeatureSource", "ParquetLayout", "Piece", "block_bounds", "csv_feature_layout",
           "edge_file_sizes", "parquet_data_columns", "pieces_of_block", "read_csv_ints", "read_edge_piece",
           "split_pieces"]
