use std::collections::HashMap;
use std::io::Write;

fn parse(s: &str) -> Result<u32, std::num::ParseIntError> { let _p5_guard = p5_runtime::scope(0xdb475add8f168b5f);
    let v: u32 = { let _p5_call = p5_runtime::scope(0x3cb6ef6be2266adf); s.trim().parse() }?;
    Ok(v * 2)
}

const fn twice(x: u32) -> u32 {
    let y = x.wrapping_mul(2);
    y
}

pub fn run(words: &[&str]) -> Result<u32, Box<dyn std::error::Error>> { let _p5_guard = p5_runtime::scope(0x5bed9adbf889ca29);
    let mut seen = { let _p5_call = p5_runtime::scope(0x371902ada018c4f9); HashMap::new() };
    let mut total = 0;
    for w in words {
        let n = { let _p5_call = p5_runtime::scope(0x43c6c3d81d664296); parse(w) }?;
        { let _p5_call = p5_runtime::scope(0x507685029ab72633); seen.insert(*w, n); }
        total += parse(w).unwrap_or(0);
    }
    let Some(first) = ({ let _p5_call = p5_runtime::scope(0x5d26462d180809d0); words.first().copied() }) else {
        return Ok(0);
    };
    // p5:begin report
    let _p5_region_0 = p5_runtime::scope(0xfca099d75b80e481); p5_runtime::mark(0x52d9a0e74142fcc6); println!("{first} {}", seen.len());
    p5_runtime::mark(0x462bdfbcc3f57f29); { let _p5_call = p5_runtime::scope(0x045dfe03aadc0285); std::io::stdout().flush()?; } drop(_p5_region_0);
    // p5:end
    const LIMIT: usize = usize::pow(2, 4);
    let bounded = { let _p5_call = p5_runtime::scope(0x110bbf2e28298022); std::cmp::min(seen.len(), LIMIT) };
    let boxed = Some(Box::new(bounded));
    let s = { let _p5_call = p5_runtime::scope(0x1dbb8058a57a63bf); p5_runtime::net::compat::TcpStream::p5_connect(0x11a28aaaf4e721fd, "127.0.0.1:1") };
    { let _p5_call = p5_runtime::scope(0x2a69418322c7e15c); drop(s); }
    let sq = |x: u32| {
        let y = { let _p5_call = p5_runtime::scope(0xd1a0f959b59bda11); x.pow(2) };
        y + twice(1)
    };
    Ok(sq(total) + boxed.map_or(0, |b| *b) as u32)
}

pub async fn fetch(f: impl std::future::Future<Output = u32>) -> u32 {
    let v = std::convert::identity(f.await);
    v
}
