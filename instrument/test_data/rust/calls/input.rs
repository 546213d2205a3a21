use std::collections::HashMap;
use std::io::Write;

fn parse(s: &str) -> Result<u32, std::num::ParseIntError> {
    let v: u32 = s.trim().parse()?;
    Ok(v * 2)
}

const fn twice(x: u32) -> u32 {
    let y = x.wrapping_mul(2);
    y
}

pub fn run(words: &[&str]) -> Result<u32, Box<dyn std::error::Error>> {
    let mut seen = HashMap::new();
    let mut total = 0;
    for w in words {
        let n = parse(w)?;
        seen.insert(*w, n);
        total += parse(w).unwrap_or(0);
    }
    let Some(first) = words.first().copied() else {
        return Ok(0);
    };
    // p5:begin report
    println!("{first} {}", seen.len());
    std::io::stdout().flush()?;
    // p5:end
    const LIMIT: usize = usize::pow(2, 4);
    let bounded = std::cmp::min(seen.len(), LIMIT);
    let boxed = Some(Box::new(bounded));
    let s = std::net::TcpStream::connect("127.0.0.1:1");
    drop(s);
    let sq = |x: u32| {
        let y = x.pow(2);
        y + twice(1)
    };
    Ok(sq(total) + boxed.map_or(0, |b| *b) as u32)
}

pub async fn fetch(f: impl std::future::Future<Output = u32>) -> u32 {
    let v = std::convert::identity(f.await);
    v
}
