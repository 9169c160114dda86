package main

import (
	"image"
	"image/color"
	"image/png"
	"io"
	"sort"
)

// encodePNG writes img as a paletted PNG: the colours dashshot draws with
// (reserved), then the most frequent others up to 256, every other colour
// drawn as the nearest of them. A dashboard is mostly flat fills with
// anti-aliased edges: the rare colours are edge pixels, where the nearest
// does not show, and a thin line keeps its exact colour. It keeps the
// picture small enough for a README.
func encodePNG(w io.Writer, img image.Image, reserved []color.RGBA) error {
	b := img.Bounds()
	count := map[color.RGBA]int{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			count[rgbaAt(img, x, y)]++
		}
	}
	colors := make([]color.RGBA, 0, len(count))
	for c := range count {
		colors = append(colors, c)
	}
	sort.Slice(colors, func(i, j int) bool {
		if count[colors[i]] != count[colors[j]] {
			return count[colors[i]] > count[colors[j]]
		}
		return lessRGBA(colors[i], colors[j])
	})
	var pal color.Palette
	index := make(map[color.RGBA]uint8, len(colors))
	for _, c := range append(reserved, colors...) {
		if _, ok := index[c]; ok || len(pal) == 256 {
			continue
		}
		index[c] = uint8(len(pal))
		pal = append(pal, c)
	}
	out := image.NewPaletted(b, pal)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := rgbaAt(img, x, y)
			i, ok := index[c]
			if !ok {
				i = uint8(pal.Index(c))
				index[c] = i
			}
			out.SetColorIndex(x, y, i)
		}
	}
	return (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(w, out)
}

func rgbaAt(img image.Image, x, y int) color.RGBA {
	if m, ok := img.(*image.RGBA); ok {
		return m.RGBAAt(x, y)
	}
	return color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
}

func lessRGBA(a, b color.RGBA) bool {
	if a.R != b.R {
		return a.R < b.R
	}
	if a.G != b.G {
		return a.G < b.G
	}
	if a.B != b.B {
		return a.B < b.B
	}
	return a.A < b.A
}
