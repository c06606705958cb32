"""kvplan simulate: play a workload through the KV pool of a plan under several allocators (contiguous
reservations, paging with sharing) and measure what each does with the same bytes."""
