#include "textflag.h"

// func timedSyscall(trap, a1, a2, a3, a4 uintptr) (r1, errno uintptr, start, end int64)
//
// The clock is read with the clock_gettime syscall rather than the vDSO,
// which costs ~100 ns on each side and needs no vDSO lookup; the time of
// the op itself is taken with nothing but register moves around it.
TEXT ·timedSyscall(SB),NOSPLIT,$16-72
	MOVQ	$228, AX		// SYS_clock_gettime
	MOVQ	$1, DI			// CLOCK_MONOTONIC
	LEAQ	0(SP), SI
	SYSCALL
	MOVQ	0(SP), AX
	IMULQ	$1000000000, AX
	ADDQ	8(SP), AX
	MOVQ	AX, start+56(FP)

	MOVQ	a1+8(FP), DI
	MOVQ	a2+16(FP), SI
	MOVQ	a3+24(FP), DX
	MOVQ	a4+32(FP), R10
	MOVQ	$0, R8
	MOVQ	$0, R9
	MOVQ	trap+0(FP), AX
	SYSCALL
	MOVQ	AX, r1+40(FP)

	MOVQ	$228, AX
	MOVQ	$1, DI
	LEAQ	0(SP), SI
	SYSCALL
	MOVQ	0(SP), AX
	IMULQ	$1000000000, AX
	ADDQ	8(SP), AX
	MOVQ	AX, end+64(FP)

	// Linux returns -errno in [-4095, -1].
	MOVQ	r1+40(FP), AX
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	NEGQ	AX
	MOVQ	AX, errno+48(FP)
	MOVQ	$-1, r1+40(FP)
	RET
ok:
	MOVQ	$0, errno+48(FP)
	RET
