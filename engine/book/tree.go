package book

// The levels of one side form a treap keyed by price, with priorities derived from the price
// (deterministic, so every replica builds the same shape). Nodes are level slots; links are
// int32. The sorted list (prev/next) serves best-price and walk access; the treap serves only
// the lookup of a price that is not the best, and the insert/delete of a level.

func (b *Book) tInsert(root, n int32) int32 {
	if root == none {
		return n
	}
	L := b.levels
	if L[n].price < L[root].price {
		L[root].left = b.tInsert(L[root].left, n)
		if L[L[root].left].prio > L[root].prio {
			root = b.rotRight(root)
		}
	} else {
		L[root].right = b.tInsert(L[root].right, n)
		if L[L[root].right].prio > L[root].prio {
			root = b.rotLeft(root)
		}
	}
	return root
}

func (b *Book) rotRight(y int32) int32 {
	L := b.levels
	x := L[y].left
	L[y].left = L[x].right
	L[x].right = y
	return x
}

func (b *Book) rotLeft(x int32) int32 {
	L := b.levels
	y := L[x].right
	L[x].right = L[y].left
	L[y].left = x
	return y
}

func (b *Book) tDelete(root int32, price int64) int32 {
	if root == none {
		return none
	}
	lv := &b.levels[root]
	switch {
	case price < lv.price:
		lv.left = b.tDelete(lv.left, price)
		return root
	case price > lv.price:
		lv.right = b.tDelete(lv.right, price)
		return root
	}
	return b.tMerge(lv.left, lv.right)
}

// tMerge joins two treaps where every key of a is below every key of c.
func (b *Book) tMerge(a, c int32) int32 {
	if a == none {
		return c
	}
	if c == none {
		return a
	}
	L := b.levels
	if L[a].prio > L[c].prio {
		L[a].right = b.tMerge(L[a].right, c)
		return a
	}
	L[c].left = b.tMerge(a, L[c].left)
	return c
}

// tBuild builds the treap of levels given in ascending price order (linked by next) in one
// linear pass (Cartesian-tree construction), for restore.
func (b *Book) tBuild(first int32, stack []int32) (int32, []int32) {
	stack = stack[:0]
	L := b.levels
	for n := first; n != none; n = L[n].next {
		last := none
		for len(stack) > 0 && L[stack[len(stack)-1]].prio < L[n].prio {
			last = stack[len(stack)-1]
			stack = stack[:len(stack)-1]
		}
		L[n].left, L[n].right = last, none
		if len(stack) > 0 {
			L[stack[len(stack)-1]].right = n
		}
		stack = append(stack, n)
	}
	if len(stack) == 0 {
		return none, stack
	}
	return stack[0], stack
}
