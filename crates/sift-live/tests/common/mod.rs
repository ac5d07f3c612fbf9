#![allow(dead_code)]

pub mod frames;
pub mod lab;
