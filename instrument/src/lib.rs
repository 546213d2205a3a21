//! p5-instrument (being written).
