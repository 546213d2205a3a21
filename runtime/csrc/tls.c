/*
 * The thread's ring pointer as a C thread-local, for p5.h's inline scope guards (stable Rust
 * cannot export a thread-local). The runtime sets it from its registration slow path
 * (p5_tls_ring_set) and clears it when the thread exits or after fork; C code only reads it.
 * It points at the producer half of the thread's ring (struct p5_ring_hot in p5.h, Producer
 * in ring.rs) and is set only for rings that stamp with the TSC.
 */
__thread void *p5_tls_ring;

void p5_tls_ring_set(void *ring) { p5_tls_ring = ring; }
