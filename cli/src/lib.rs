//! p5-cli (placeholder, being written).
