//! A module with every kind of fn.
use std::io;

pub struct Counter {
    n: u64,
}

impl Counter {
    pub fn new() -> Self {
        Counter { n: 0 }
    }

    pub fn bump(&mut self) -> io::Result<u64> {
        if self.n > 10 {
            return Err(io::Error::other("full"));
        }
        self.n += 1;
        Ok(self.n)
    }

    pub const fn limit() -> u64 {
        10
    }
}

pub trait Named {
    fn name(&self) -> String {
        String::from("anon")
    }
    fn id(&self) -> u64;
}

pub async fn later() -> u32 {
    1
}

mod inner {
    pub fn total(xs: &[u64]) -> u64 {
        let mut t = 0;
        // p5:begin sum
        for x in xs {
            t += x;
        }
        t *= 2;
        // p5:end
        t
    }
}

fn parse(s: &str) -> Result<u64, std::num::ParseIntError> {
    let v = s.trim().parse::<u64>()?;
    Ok(v + inner::total(&[v]))
}

fn quiet() {
    #![allow(unused_variables)]
    // the guard goes after the inner attribute
    let x = 1;
}
