//! Measures effective cache sizes, latencies, TLB reach and timer properties with generated C micro-benchmarks.
