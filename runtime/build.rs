//! Compiles `csrc/tls.c`: the C thread-local that `p5.h`'s inline scope guards read.

fn main() {
    println!("cargo:rerun-if-changed=csrc/tls.c");
    cc::Build::new()
        .file("csrc/tls.c")
        .flag_if_supported("-ftls-model=initial-exec")
        .compile("p5tls");
}
