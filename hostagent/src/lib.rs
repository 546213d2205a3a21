//! p5-hostagent (being written).
